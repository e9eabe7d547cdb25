// One batch of lookups against /proc (docs/identity.md#how-a-connection-maps-to-a-process): the socket tables are
// read once for the whole batch, the process table is walked once for every socket found, then each connection
// gets its owner's identity, or the reason it has none. Asynchronous reads only (proc-fs.ts).

import { findSockets, pairKeys, type TcpSocket } from './proc-net.js';
import { findOwners } from './proc-owners.js';
import { grantSet, type ProcContext, processIdentity } from './proc-process.js';
import { failed, type IdentityResult, type LookupRequest, MAX_IDENTITY_PATH_BYTES } from './source.js';
import { type LinkCache, resolvePaths } from './symlinks.js';

/** A socket table larger than this is read only this far (about 200,000 sockets); a socket past it is not found. */
export const MAX_SOCKET_TABLE_BYTES = 32 * 1024 * 1024;
/** The tables a connection can appear in: IPv4, and IPv6 (dual-stack sockets show IPv4 ends as ::ffff:a.b.c.d). */
const TABLES = ['net/tcp', 'net/tcp6'] as const;

export interface ScanContext extends ProcContext {
  readonly links: LinkCache;
  /** Pids whose fds are never examined: the scanning process's own. */
  readonly skip: ReadonlySet<number>;
}

/**
 * Finds each request's socket: tcp first, tcp6 only for a socket still missing (a dual-stack client, or IPv6).
 * Reading a table walks the kernel's whole connection hash, milliseconds on a large node (docs/identity.md#cost),
 * so the second is skipped when it cannot help. Undefined when neither table can be read.
 */
async function findAll(ctx: ScanContext, keys: readonly (readonly string[])[]): Promise<Map<string, TcpSocket> | undefined> {
  const wanted = new Set(keys.flat());
  const found = new Map<string, TcpSocket>();
  let readAny = false;
  for (const table of TABLES) {
    if (keys.every((k) => k.some((key) => found.has(key)))) break;
    const text = await ctx.fs.readText(`${ctx.root}/${table}`, MAX_SOCKET_TABLE_BYTES).catch(() => undefined);
    if (text === undefined) continue;
    readAny = true;
    findSockets(text, wanted, found);
  }
  return readAny ? found : undefined;
}

export async function scanBatch(ctx: ScanContext, requests: readonly LookupRequest[]): Promise<IdentityResult[]> {
  // The workload's end is the local side of its socket, and the proxy's end the remote one.
  const keys = requests.map((r) => pairKeys(r.client, r.proxy));
  const found = await findAll(ctx, keys);
  if (found === undefined) return requests.map(() => failed('proc-unavailable', `${ctx.root}/net/tcp cannot be read: is /proc mounted and visible?`));
  const socketOf = keys.map((k) => k.map((key) => found.get(key)).find((s) => s !== undefined));
  const sockets = new Map(socketOf.flatMap((s) => (s === undefined ? [] : [[s.inode, s.uid] as const])));
  let owners: Awaited<ReturnType<typeof findOwners>>;
  try {
    owners = sockets.size === 0 ? { byInode: new Map(), denied: false } : await findOwners(ctx, sockets, ctx.skip);
  } catch {
    return requests.map(() => failed('proc-unavailable', `${ctx.root} cannot be listed`));
  }
  return Promise.all(
    requests.map(async (request, i) => {
      const socket = socketOf[i];
      const pair = `${request.client.ip}:${request.client.port} -> ${request.proxy.ip}:${request.proxy.port}`;
      if (socket === undefined) return failed('socket-not-found', `no ESTABLISHED TCP socket ${pair} in this network namespace`);
      const pids = owners.byInode.get(socket.inode) ?? [];
      if (pids.length === 0) {
        return owners.denied
          ? failed('permission-denied', `socket ${socket.inode} (${pair}): processes of another uid could not be read (CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH)`)
          : failed('owner-not-found', `socket ${socket.inode} (${pair}) is held by no visible process: is the PID namespace shared?`);
      }
      return ownerIdentity(ctx, socket.inode, pids, request.paths);
    }),
  );
}

/** The identity of a socket's owners: one, or several alike; several that policy could tell apart are ambiguous. */
async function ownerIdentity(ctx: ScanContext, inode: number, pids: readonly number[], paths: readonly string[]): Promise<IdentityResult> {
  const results = await Promise.all(pids.map((pid) => processIdentity(ctx, pid)));
  const read = results.flatMap((r) => (r.ok ? [r.identity] : []));
  const first = read[0];
  // Owners that exited since the scan hold nothing any more; if none is left, the first failure says why.
  if (first === undefined) return results[0] as IdentityResult;
  if (read.some((identity) => grantSet(identity) !== grantSet(first))) {
    const shown = read.map((identity) => `${identity.pid} ${identity.exe}`).join(', ');
    return failed('ambiguous-owner', `socket ${inode} is held by processes policy would judge differently: ${shown}`);
  }
  const usable = paths.filter((p) => Buffer.byteLength(p) <= MAX_IDENTITY_PATH_BYTES);
  const resolved = await resolvePaths(ctx.fs, ctx.links, ctx.root, first.pid, usable);
  return { ok: true, identity: { ...first, resolved } };
}
