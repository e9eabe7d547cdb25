// One batch of lookups against /proc (docs/identity.md#how-a-connection-maps-to-a-process): the socket tables are
// read once for the batch (not at all for a re-check, which names its socket), the process table is walked once for
// every socket, then each connection gets the identities of every process holding it (proc-holder.ts), or the
// reason it has none. Asynchronous reads only (proc-fs.ts).

import type { MappingCache } from './proc-code.js';
import type { ProcFs } from './proc-fs.js';
import { holderIdentity } from './proc-holder.js';
import { findSockets, pairKeys, type TcpSocket } from './proc-net.js';
import { findOwners, type Owners } from './proc-owners.js';
import { readChain } from './proc-process.js';
import type { VerifyContext } from './proc-verify.js';
import { failed, type IdentityResult, type LookupRequest, type ProcessIdentity, type SocketRef } from './source.js';
import type { LinkCache } from './symlinks.js';

/** A socket table larger than this is read only this far (about 200,000 sockets); a socket past it is not found. */
export const MAX_SOCKET_TABLE_BYTES = 32 * 1024 * 1024;
/** Processes holding one socket that a lookup reads; more fail `ambiguous-owner` (docs/identity.md#shared-sockets). */
export const MAX_SOCKET_HOLDERS = 64;
/** The tables a connection can appear in: IPv4, and IPv6 (dual-stack sockets show IPv4 ends as ::ffff:a.b.c.d). */
const TABLES = ['net/tcp', 'net/tcp6'] as const;

export interface ScanContext extends VerifyContext {
  readonly links: LinkCache;
  readonly mappings: MappingCache;
  /** Pids whose fds are never examined: the scanning process's own. */
  readonly skip: ReadonlySet<number>;
}

/** A context whose caches (argv, links, mappings, pins) last as long as it does: one per identity source. */
export function createScanContext(options: { readonly root: string; readonly fs: ProcFs; readonly skipPids: readonly number[]; readonly now: () => number }): ScanContext {
  return {
    root: options.root,
    fs: options.fs,
    processes: new Map(),
    links: { entries: new Map(), now: options.now },
    mappings: { entries: new Map(), now: options.now },
    verify: { pins: new Map(), fingerprints: new Map() },
    skip: new Set(options.skipPids),
  };
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
  // The workload's end is the local side of its socket, and the proxy's end the remote one. A re-check names its
  // socket already: boundary holds its own end open, so the pair cannot have been reused meanwhile.
  const keys = requests.map((r) => (r.socket === undefined ? pairKeys(r.client, r.proxy) : []));
  const found = keys.some((k) => k.length > 0) ? await findAll(ctx, keys) : new Map<string, TcpSocket>();
  const socketOf = requests.map((r, i): SocketRef | undefined => r.socket ?? keys[i]?.map((key) => found?.get(key)).find((s) => s !== undefined));
  const sockets = new Map(socketOf.flatMap((s) => (s === undefined ? [] : [[s.inode, s.uid] as const])));
  let owners: Owners;
  try {
    owners = sockets.size === 0 ? { byInode: new Map(), denied: false, unreadableUids: new Set() } : await findOwners(ctx, sockets, ctx.skip);
  } catch {
    return requests.map(() => failed('proc-unavailable', `${ctx.root} cannot be listed`));
  }
  // Requests about the same socket with the same policy paths (streams of one tunnel) share one answer.
  const shared = new Map<string, Promise<IdentityResult>>();
  return Promise.all(
    requests.map((request, i) => {
      if (found === undefined && request.socket === undefined) {
        return failed('proc-unavailable', `${ctx.root}/net/tcp cannot be read: is /proc mounted and visible?`);
      }
      const socket = socketOf[i];
      const pair = `${request.client.ip}:${request.client.port} -> ${request.proxy.ip}:${request.proxy.port}`;
      if (socket === undefined) return failed('socket-not-found', `no ESTABLISHED TCP socket ${pair} in this network namespace`);
      const pids = owners.byInode.get(socket.inode) ?? [];
      if (pids.length === 0) {
        return owners.denied
          ? failed('permission-denied', `socket ${socket.inode} (${pair}): processes of another uid could not be read (CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH)`)
          : failed('owner-not-found', `socket ${socket.inode} (${pair}) is held by no visible process: is the PID namespace shared?`);
      }
      if (owners.unreadableUids.has(socket.uid)) {
        return failed('permission-denied', `socket ${socket.inode} (${pair}): a process of uid ${socket.uid} could not be read, so not every holder is known`);
      }
      const key = JSON.stringify([socket.inode, request.paths, request.globs ?? []]);
      let answer = shared.get(key);
      if (answer === undefined) {
        answer = socketIdentity(ctx, socket, pids, request);
        shared.set(key, answer);
      }
      return answer;
    }),
  );
}

/** Everything policy could grant on, verification included: holders alike in it are one (a fork of the same program). */
function grantKey(identity: ProcessIdentity): string {
  const sorted = (list: readonly string[]): string[] => [...new Set(list)].sort();
  const distrusted = sorted(identity.distrusted.map((d) => `${d.failure} ${d.path}`));
  return JSON.stringify([sorted([identity.exe, ...identity.ancestors]), sorted(identity.verified), distrusted, sorted(identity.resolved.map((r) => r.join('\0')))]);
}

/** The identities of every process holding the socket: all of them are judged (docs/identity.md#shared-sockets). */
async function socketIdentity(ctx: ScanContext, socket: SocketRef, pids: readonly number[], request: LookupRequest): Promise<IdentityResult> {
  if (pids.length > MAX_SOCKET_HOLDERS) return failed('ambiguous-owner', `socket ${socket.inode} is held by ${pids.length} processes, more than ${MAX_SOCKET_HOLDERS}`);
  const chains = await Promise.all(pids.map((pid) => readChain(ctx, pid)));
  // A holder that exited since the scan holds nothing any more; one that cannot be read could be anything.
  const unreadable = chains.find((c) => !c.ok && c.failure === 'permission-denied');
  if (unreadable !== undefined && !unreadable.ok) return failed(unreadable.failure, unreadable.detail);
  const read = chains.flatMap((c) => (c.ok ? [c.chain] : []));
  const first = chains[0];
  if (read.length === 0 && first !== undefined && !first.ok) return failed(first.failure, first.detail);
  const identities: ProcessIdentity[] = [];
  const seen = new Set<string>();
  for (const chain of read) {
    const held = await holderIdentity(ctx, chain, request);
    if (!held.ok) return held;
    const key = grantKey(held.identity);
    if (seen.has(key)) continue;
    seen.add(key);
    identities.push(held.identity);
  }
  const [identity, ...holders] = identities;
  if (identity === undefined) return failed('owner-exited', `socket ${socket.inode}: its holders exited`);
  return { ok: true, identity, holders, socket };
}
