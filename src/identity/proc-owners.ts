// Which processes hold a socket (docs/identity.md#how-a-connection-maps-to-a-process): every /proc/<pid>/fd link
// equal to `socket:[<inode>]`, for all wanted inodes in one pass. Processes of the uid that created a socket are
// read first (in a pod, not boundary's own thousands of fds); everyone else only for a socket still without owner.

import { errorCode, mapLimit, PROC_READS_IN_FLIGHT } from './proc-fs.js';
import type { ProcContext } from './proc-process.js';

/** fds read per process: a process holding more has the rest unexamined, and its sockets there are not found. */
export const MAX_FDS_PER_PROCESS = 65_536;

const PID_NAME = /^[1-9][0-9]*$/;
const SOCKET_LINK = /^socket:\[([0-9]+)\]$/;

export interface Owners {
  /** Owning pids by inode, ascending; an inode nobody holds is absent. */
  readonly byInode: ReadonlyMap<number, readonly number[]>;
  /** Some process's fds could not be read: CAP_SYS_PTRACE / CAP_DAC_READ_SEARCH are missing for it. */
  readonly denied: boolean;
  /** Uids with a process whose fds could not be read: not every holder of their sockets is known. */
  readonly unreadableUids: ReadonlySet<number>;
}

/** Adds `pid` to the owners of every wanted inode its fds link to; true when its fd directory was unreadable. */
async function scanFds(ctx: ProcContext, pid: number, wanted: ReadonlySet<number>, byInode: Map<number, number[]>): Promise<boolean> {
  let fds: string[];
  try {
    fds = await ctx.fs.readdir(`${ctx.root}/${pid}/fd`);
  } catch (err) {
    const code = errorCode(err);
    return code === 'EACCES' || code === 'EPERM';
  }
  for (const fd of fds.slice(0, MAX_FDS_PER_PROCESS)) {
    const link = await ctx.fs.readlink(`${ctx.root}/${pid}/fd/${fd}`).catch(() => '');
    const inode = Number(SOCKET_LINK.exec(link)?.[1]);
    if (!wanted.has(inode)) continue;
    const list = byInode.get(inode);
    if (list === undefined) byInode.set(inode, [pid]);
    else if (!list.includes(pid)) list.push(pid);
  }
  return false;
}

/**
 * Owners of each socket. `sockets` maps inode -> the uid that created it; `skip` holds pids never examined (the
 * caller's own: its fds are the proxy's ends, never a workload's).
 */
export async function findOwners(ctx: ProcContext, sockets: ReadonlyMap<number, number>, skip: ReadonlySet<number>): Promise<Owners> {
  const byInode = new Map<number, number[]>();
  const pids = (await ctx.fs.readdir(ctx.root)).filter((name) => PID_NAME.test(name)).map(Number).filter((pid) => !skip.has(pid));
  const uids = new Set(sockets.values());
  const uidOf = await mapLimit(pids, PROC_READS_IN_FLIGHT, (pid) => ctx.fs.stat(`${ctx.root}/${pid}`).then((s) => s.uid, () => -1));
  const first = pids.flatMap((pid, i) => (uids.has(uidOf[i] as number) ? [{ pid, uid: uidOf[i] as number }] : []));
  const all = new Set(sockets.keys());
  const firstDenied = await mapLimit(first, PROC_READS_IN_FLIGHT, (p) => scanFds(ctx, p.pid, all, byInode));
  let denied = firstDenied.some(Boolean);
  // A process of the socket's uid that could not be read may hold it: its sockets cannot be judged whole.
  const unreadableUids = new Set(first.filter((_, i) => firstDenied[i]).map((p) => p.uid));
  const unowned = new Set([...all].filter((inode) => !byInode.has(inode)));
  if (unowned.size > 0) {
    // A process that changed uid after opening its socket (a root entrypoint dropping privileges) is found here.
    const rest = pids.filter((_, i) => !uids.has(uidOf[i] as number));
    denied = (await mapLimit(rest, PROC_READS_IN_FLIGHT, (pid) => scanFds(ctx, pid, unowned, byInode))).some(Boolean) || denied;
  }
  for (const list of byInode.values()) list.sort((a, b) => a - b);
  return { byInode, denied, unreadableUids };
}
