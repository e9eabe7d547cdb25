// Runs a container of a parsed pod spec the way the kubelet would, as a process in the pod's network
// namespace: its volumes bind-mounted at their mountPaths (Secrets, ConfigMaps and CSI volumes in the atomic
// writer's `..data` symlink layout, read-only), its uid, gid and capabilities applied with setpriv, its env only;
// and the resolv.conf the kubelet writes for it. Root only. What a namespace cannot show (image file system,
// cgroups, seccomp) is left to a real cluster.

import { chmod, chown, mkdir, readdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { CsiDriver } from './k8s-csi-cert.js';
import type { Container, PodSpec, Volume } from './k8s-manifest.js';
import { projectedDir } from './projected-dir.js';

/** Secret or ConfigMap contents by name: key -> file content. */
export type VolumeSources = Readonly<Record<string, Readonly<Record<string, string>>>>;

/** The files a Secret or ConfigMap volume shows: every key, or the `items` mapping of keys to paths. */
function projectedFiles(volume: Extract<Volume, { kind: 'secret' | 'configMap' }>, sources: VolumeSources): Record<string, string> {
  const data = sources[volume.source];
  if (data === undefined) throw new Error(`the test provides no ${volume.kind} named ${volume.source}`);
  if (volume.items === undefined) return { ...data };
  return Object.fromEntries(
    volume.items.map((item) => {
      const content = data[item.key];
      if (content === undefined) throw new Error(`${volume.kind} ${volume.source} has no key ${item.key}`);
      if (item.path.includes('/')) throw new Error(`${volume.name}: nested item paths are not emulated`);
      return [item.path, content] as const;
    }),
  );
}

/**
 * One directory per volume under `root` (world-traversable): projected Secrets/ConfigMaps, emptyDirs, claims and
 * CSI volumes (filled by `csi`). Called again with the same root (a container restart), a claim's directory keeps
 * what it holds.
 */
export async function materialiseVolumes(pod: PodSpec, sources: VolumeSources, root: string, csi?: CsiDriver): Promise<Map<string, string>> {
  const dirs = new Map<string, string>();
  for (const volume of pod.volumes) {
    const dir = join(root, pod.name, volume.name);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    if (volume.kind === 'emptyDir') {
      // An emptyDir is 0777: any container's uid writes to it.
      await chmod(dir, 0o777);
    } else if (volume.kind === 'persistentVolumeClaim') {
      // A provisioned volume is root's; the kubelet gives it to fsGroup (setgid), or nobody else may write.
      if (pod.fsGroup !== undefined) {
        await chown(dir, 0, pod.fsGroup);
        await chmod(dir, 0o2770);
      }
    } else if (volume.kind === 'csi') {
      if (csi === undefined) throw new Error(`${volume.name}: the test provides no CSI driver for ${volume.driver}`);
      const content = await csi(volume, pod);
      await projectedDir(content.files, { dir });
      // The atomic writer's timestamped directory is 0755; the driver sets the files and the volume's own mode.
      await chmod(join(dir, '..data'), 0o755);
      for (const name of Object.keys(content.files)) {
        await chown(join(dir, '..data', name), 0, content.gid ?? 0);
        await chmod(join(dir, '..data', name), content.fileMode);
      }
      await chown(dir, 0, content.gid ?? 0);
      await chmod(dir, content.dirMode);
    } else {
      // The kubelet's atomic-writer layout (`name -> ..data/name`), files 0644 like its defaultMode.
      const files = projectedFiles(volume, sources);
      await projectedDir(files, { dir });
      await chmod(dir, 0o755);
      // Whatever this process's umask: the container's uid must read them (chmod follows `..data`).
      await chmod(join(dir, '..data'), 0o755);
      for (const name of Object.keys(files)) await chmod(join(dir, '..data', name), 0o644);
    }
    dirs.set(volume.name, dir);
  }
  return dirs;
}

/**
 * Where test processes record the mount points they made and which of them each live process still needs. Two pod
 * tests running at once both mount at /var/run/boundary-ca: the one that finishes first must not remove the
 * directory the other is about to bind-mount over. Root only, as every test that makes mount points is.
 */
export const MOUNTPOINT_REGISTRY = '/run/boundary-test-mountpoints';
/** How often a process waiting for the registry's lock tries again, and how long it waits before it gives up. */
const REGISTRY_LOCK_RETRY_MS = 10;
const REGISTRY_LOCK_WAIT_MS = 30_000;

interface MountpointState {
  /** Directories test processes created, to be removed once no live process needs them. */
  made: string[];
  /** By `<pid>/<call>`: the mount points one ensureMountpoints call of a live process still needs. */
  holders: Record<string, string[]>;
}

let mountpointCalls = 0;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs `change` on the registry's state under its lock file (created exclusively, holding the owner's pid). */
async function withRegistry(registry: string, change: (state: MountpointState) => Promise<void>): Promise<void> {
  const lock = join(registry, 'lock');
  const stateFile = join(registry, 'state.json');
  for (const deadline = Date.now() + REGISTRY_LOCK_WAIT_MS; ; ) {
    try {
      await mkdir(registry, { recursive: true });
      await writeFile(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch (error) {
      // EEXIST: the lock is held. ENOENT: the last process to leave removed the registry between the two calls.
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOENT') throw error;
      const owner = code === 'EEXIST' ? Number(await readFile(lock, 'utf8').catch(() => '0')) : 0;
      // An owner that died inside its few milliseconds under the lock left it behind.
      if (owner > 0 && !alive(owner)) await rm(lock, { force: true });
      else if (Date.now() > deadline) throw new Error(`${lock} not taken within ${REGISTRY_LOCK_WAIT_MS} ms (held by pid ${owner})`);
      else if (code === 'EEXIST') await delay(REGISTRY_LOCK_RETRY_MS);
    }
  }
  try {
    const text = await readFile(stateFile, 'utf8').catch(() => undefined);
    const state: MountpointState = text === undefined ? { made: [], holders: {} } : (JSON.parse(text) as MountpointState);
    await change(state);
    if (state.made.length > 0 || Object.keys(state.holders).length > 0) await writeFile(stateFile, JSON.stringify(state));
    else await rm(stateFile, { force: true });
  } finally {
    await rm(lock, { force: true });
  }
  // Nothing left to record: the host is as the tests found it (rmdir fails while a state or a lock is in it).
  await rmdir(registry).catch(() => undefined);
}

/**
 * Creates the mountPaths that do not exist on this host (bind mounts need a directory to cover); they are
 * mounted over only inside each container's own mount namespace. Returns the cleanup: it removes the directories
 * any test made that no live test process still needs, deepest first.
 */
export async function ensureMountpoints(paths: Iterable<string>, registry = MOUNTPOINT_REGISTRY): Promise<() => Promise<void>> {
  const needed = [...new Set(paths)];
  const holder = `${process.pid}/${++mountpointCalls}`;
  await withRegistry(registry, async (state) => {
    for (const path of needed) {
      const made = await mkdir(path, { recursive: true });
      if (made === undefined) continue;
      // mkdir returns the first directory it created; every one from there down to path is a test's.
      for (let dir = path; dir.length >= made.length; dir = dirname(dir)) {
        // Traversable by the containers' uids whatever this process's umask.
        await chmod(dir, 0o755);
        state.made.push(dir);
      }
    }
    state.holders[holder] = needed;
  });
  return () =>
    withRegistry(registry, async (state) => {
      delete state.holders[holder];
      for (const other of Object.keys(state.holders)) if (!alive(Number.parseInt(other, 10))) delete state.holders[other];
      const inUse = Object.values(state.holders).flat();
      const kept: string[] = [];
      for (const dir of [...new Set(state.made)].sort((a, b) => b.length - a.length)) {
        const needed = inUse.some((path) => path === dir || path.startsWith(`${dir}/`));
        if (!needed && (await readdir(dir).catch(() => [])).length === 0) await rmdir(dir).catch(() => undefined);
        else kept.push(dir);
      }
      state.made = kept;
    });
}

function capabilityArgs(c: Container, fsGroup: number | undefined): string[] {
  const adds = c.security.addCaps.map((cap) => `+${cap.toLowerCase()}`);
  const bounding = c.security.dropAll || adds.length > 0 ? ['-all', ...adds].join(',') : undefined;
  if (c.security.runAsUser !== 0 && adds.length > 0) throw new Error(`${c.name}: added capabilities for a non-root uid are not emulated`);
  // uid 0 keeps its uid; a runAsGroup still sets its gid (the identity sidecar's socket group is boundary's).
  const rootGroup = c.security.runAsGroup === undefined ? [] : [`--regid=${c.security.runAsGroup}`, '--clear-groups'];
  return [
    ...(c.security.runAsUser === 0
      ? rootGroup
      : [`--reuid=${c.security.runAsUser}`, `--regid=${c.security.runAsGroup ?? c.security.runAsUser}`, fsGroup === undefined ? '--clear-groups' : `--groups=${fsGroup}`]),
    '--inh-caps=-all',
    ...(bounding === undefined ? [] : [`--bounding-set=${bounding}`]),
    ...(c.security.allowPrivilegeEscalation ? [] : ['--no-new-privs']),
  ];
}

/**
 * argv for spawn(): `ip netns exec NS sh -c '<bind mounts>; exec setpriv ... "$@"' sh COMMAND...`.
 * The command is what the container runs (the image entrypoint plus the manifest's args, or a client).
 */
export function containerArgv(options: { netns: string; pod: PodSpec; container: Container; volumes: ReadonlyMap<string, string>; command: readonly string[] }): string[] {
  const { container: c } = options;
  if (c.security.runAsNonRoot && c.security.runAsUser === 0) throw new Error(`${c.name}: runAsNonRoot with runAsUser 0 would not start`);
  const mounts = c.volumeMounts.map((m) => {
    const source = options.volumes.get(m.name);
    if (source === undefined) throw new Error(`${c.name} mounts ${m.name}, which the pod does not declare`);
    const volume = options.pod.volumes.find((v) => v.name === m.name);
    // Secrets and ConfigMaps are always mounted read-only by the kubelet.
    const readOnly = m.readOnly || (volume?.kind !== 'emptyDir' && volume?.kind !== 'persistentVolumeClaim');
    return `mount --bind '${source}' '${m.mountPath}'${readOnly ? ` && mount -o remount,bind,ro '${m.mountPath}'` : ''}`;
  });
  const script = [...mounts, `exec setpriv ${capabilityArgs(c, options.pod.fsGroup).join(' ')} -- "$@"`].join(' && ');
  return ['ip', 'netns', 'exec', options.netns, 'sh', '-c', script, 'sh', ...options.command];
}

/** The container's environment as the kubelet sets it (HOSTNAME is the pod's name), plus a PATH. */
export function containerEnv(pod: PodSpec, c: Container, extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return { PATH: '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin', HOSTNAME: pod.name, ...Object.fromEntries(c.env.map((e) => [e.name, e.value])), ...extra };
}

/**
 * /etc/resolv.conf as the kubelet writes it for this pod: ClusterFirst searches the pod's namespace and the
 * cluster domain through the cluster DNS with ndots:5; dnsConfig adds to it; None uses dnsConfig alone.
 */
export function podResolvConf(pod: PodSpec, cluster: { dnsIp: string; domain: string }): string {
  const base =
    pod.dnsPolicy === 'ClusterFirst'
      ? { nameservers: [cluster.dnsIp], searches: [`${pod.namespace}.svc.${cluster.domain}`, `svc.${cluster.domain}`, cluster.domain], options: ['ndots:5'] }
      : { nameservers: [], searches: [], options: [] };
  const nameservers = [...base.nameservers, ...pod.dnsConfig.nameservers];
  const searches = [...base.searches, ...pod.dnsConfig.searches];
  // A dnsConfig option replaces the base option of the same name.
  const optionName = (o: string) => o.split(':')[0];
  const options = [...base.options.filter((o) => !pod.dnsConfig.options.some((d) => optionName(d) === optionName(o))), ...pod.dnsConfig.options];
  if (nameservers.length === 0) throw new Error(`${pod.name}: no nameserver in its DNS configuration`);
  return [
    ...(searches.length > 0 ? [`search ${searches.join(' ')}`] : []),
    ...nameservers.map((n) => `nameserver ${n}`),
    ...(options.length > 0 ? [`options ${options.join(' ')}`] : []),
    '',
  ].join('\n');
}
