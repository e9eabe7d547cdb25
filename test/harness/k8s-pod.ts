// Runs a container of a parsed pod spec the way the kubelet would, as a process in the pod's network
// namespace: its volumes bind-mounted at their mountPaths (Secrets and ConfigMaps in the kubelet's `..data`
// symlink layout, read-only), its uid, gid and capabilities applied with setpriv, its env only.
// Root only. What a namespace cannot show (image file system, cgroups, seccomp) is left to a real cluster.

import { chmod, chown, mkdir, readdir, rmdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Container, PodSpec, Volume } from './k8s-manifest.js';
import { projectedDir } from './projected-dir.js';

/** Secret or ConfigMap contents by name: key -> file content. */
export type VolumeSources = Readonly<Record<string, Readonly<Record<string, string>>>>;

/** The files a Secret or ConfigMap volume shows: every key, or the `items` mapping of keys to paths. */
function projectedFiles(volume: Extract<Volume, { source: string }>, sources: VolumeSources): Record<string, string> {
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
 * One directory per volume under `root` (world-traversable): projected Secrets/ConfigMaps, emptyDirs and claims.
 * Called again with the same root (a container restart), a claim's directory keeps what it holds.
 */
export async function materialiseVolumes(pod: PodSpec, sources: VolumeSources, root: string): Promise<Map<string, string>> {
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
 * Creates the mountPaths that do not exist on this host (bind mounts need a directory to cover); they are
 * mounted over only inside each container's own mount namespace. Returns the cleanup, deepest first.
 */
export async function ensureMountpoints(paths: Iterable<string>): Promise<() => Promise<void>> {
  const created: string[] = [];
  for (const path of new Set(paths)) {
    const made = await mkdir(path, { recursive: true });
    if (made === undefined) continue;
    // mkdir returns the first directory it created; every one from there down to path is ours.
    for (let dir = path; dir.length >= made.length; dir = dirname(dir)) {
      // Traversable by the containers' uids whatever this process's umask.
      await chmod(dir, 0o755);
      created.push(dir);
    }
  }
  created.sort((a, b) => b.length - a.length);
  return async () => {
    for (const dir of new Set(created)) {
      if ((await readdir(dir).catch(() => ['?'])).length === 0) await rmdir(dir).catch(() => undefined);
    }
  };
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
