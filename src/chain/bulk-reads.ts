// Reads of a passthrough tunnel's upstream socket (the download direction) into buffers supplied here (net's
// `onread`) instead of a new buffer per read: a transfer that keeps the socket busy reads into a large buffer of
// its own and the relay writes each chunk to the client straight from it (docs/destinations.md#bulk-transfers).

import { connect, type NetConnectOpts, type Socket } from 'node:net';

/** Light traffic reads into this one buffer, shared by every such socket; each chunk is copied out at once. */
export const SHARED_READ_BYTES = 65_536;
/** A read that fills the shared buffer moves its socket to a buffer of its own this large: fewer reads, no copies. */
export const BULK_READ_BYTES = 1_048_576;
/** Own buffers in use at once; past it a transfer stays on the shared buffer (what stalled downloads hold is bounded). */
export const MAX_BULK_READ_BUFFERS = 8;

/**
 * Where a socket's reads go once a relay took it. Returns true to go on reading, false to stop until the socket's
 * `resume()`. An `owned` chunk lies in the socket's own buffer, which the next read overwrites: the sink returns
 * true for it only when nothing refers to the chunk any more (the bytes are in the kernel).
 */
export type ChunkSink = (chunk: Buffer, owned: boolean) => boolean;

interface Reads {
  sink: ChunkSink | undefined;
  own: Buffer | undefined;
}

const readsOf = new WeakMap<Socket, Reads>();
let shared: Buffer | undefined;
let ownBuffers = 0;

function release(reads: Reads): void {
  if (reads.own === undefined) return;
  reads.own = undefined;
  ownBuffers--;
}

function onRead(this: Socket, bytes: number, buffer: Buffer): boolean {
  const reads = readsOf.get(this) as Reads;
  // Before a relay took the socket, reads queue on it as node's own would.
  if (reads.sink === undefined) return this.push(Buffer.from(buffer.subarray(0, bytes)));
  if (buffer === reads.own) {
    const more = reads.sink(buffer.subarray(0, bytes), true);
    // Small reads again: the transfer is over or slow, and the shared buffer serves it.
    if (more && bytes < SHARED_READ_BYTES) release(reads);
    return more;
  }
  const more = reads.sink(Buffer.from(buffer.subarray(0, bytes)), false);
  if (bytes === buffer.length && reads.own === undefined && ownBuffers < MAX_BULK_READ_BUFFERS) {
    reads.own = Buffer.allocUnsafeSlow(BULK_READ_BYTES);
    ownBuffers++;
  }
  return more;
}

/** Own buffers in use now (tests check the bound and that closed sockets give theirs back). */
export function bulkReadBuffersInUse(): number {
  return ownBuffers;
}

/** net.connect whose reads can later be handed to a relay with `sendReadsTo`. */
export function connectForBulkReads(options: NetConnectOpts): Socket {
  const reads: Reads = { sink: undefined, own: undefined };
  const socket = connect({
    ...options,
    onread: {
      // Called after every read for the next one, with no `this`: each socket needs its own.
      buffer: () => {
        if (reads.own !== undefined) return reads.own;
        shared ??= Buffer.allocUnsafeSlow(SHARED_READ_BYTES);
        return shared;
      },
      callback: onRead,
    },
  });
  readsOf.set(socket, reads);
  socket.once('close', () => release(reads));
  return socket;
}

/**
 * From now on every read of `socket` goes to `sink`; bytes read before are handed over first. False when the
 * socket was not made by connectForBulkReads: the caller relays it as a stream.
 */
export function sendReadsTo(socket: Socket, sink: ChunkSink): boolean {
  const reads = readsOf.get(socket);
  if (reads === undefined) return false;
  for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) sink(chunk, false);
  reads.sink = sink;
  return true;
}
