// How the HTTP/1.1 client reads an upstream socket: straight from a plain TCP socket's native handle, as the server
// reads its clients (server-parser.ts), else from 'data' events (TLS, a socket with a timeout, bytes already buffered
// or other readers). Bytes only; the response parser is the caller's. The handle's reads are taken over by
// readFromHandle, which HTTP/2's sessions use as well (http2/socket-reads.ts).

import type { Socket } from 'node:net';

/** Reading control over one upstream socket. */
export interface ByteFeed {
  /** No more reads until resume(). */
  pause(): void;
  resume(): void;
}

interface ReadHandle {
  readonly isStreamBase?: boolean;
  reading?: boolean;
  onread: ((this: ReadHandle, arrayBuffer: ArrayBuffer | undefined) => unknown) | undefined;
  readStart(): number;
  readStop(): number;
}

/** What node's own read handler does first on every read: the idle timeouts of the socket and of those it wraps restart. */
interface TimedSocket {
  _unrefTimer(): void;
}

/**
 * Takes over `socket`'s reads: each read of its native handle goes straight to `onData`, without the stream's push,
 * 'data' event and read-ahead tick; with `restartTimers`, each read restarts the idle timeouts of the socket and of
 * those it wraps as node's own read does (a caller that sets none, as the HTTP/1.1 client, skips it). The end of the stream and read errors still go through node's handler, so 'end', 'error' and 'close'
 * come as before. Returns the handle; undefined, with nothing changed, when the socket is still connecting, has bytes
 * buffered or another reader, or its handle is not node's stream. The caller makes the socket flow (so the peer's FIN
 * is still heard).
 */
export function readFromHandle(socket: Socket, onData: (chunk: Buffer) => void, restartTimers: boolean): ReadHandle | undefined {
  const handle = (socket as Socket & { _handle?: ReadHandle | null })._handle;
  const streamRead = handle?.onread;
  const timed = socket as unknown as Partial<TimedSocket>;
  if (
    handle === undefined || handle === null || handle.isStreamBase !== true || typeof streamRead !== 'function' || (restartTimers && typeof timed._unrefTimer !== 'function') ||
    socket.connecting || socket.readableLength !== 0 || socket.listenerCount('data') !== 0
  ) {
    return undefined;
  }
  const socketTimers = timed as TimedSocket;
  // A read of n > 0 bytes arrives as an ArrayBuffer of exactly n bytes; the end and errors arrive without one.
  handle.onread = function onHandleRead(arrayBuffer) {
    if (arrayBuffer === undefined || socket.destroyed) return streamRead.call(this, arrayBuffer);
    if (restartTimers) socketTimers._unrefTimer();
    onData(Buffer.from(arrayBuffer));
    return undefined;
  };
  return handle;
}

/** Hands every chunk read from `socket` to `onData`: from the handle on a plain TCP socket without a timeout. */
export function feedBytes(socket: Socket, onData: (chunk: Buffer) => void): ByteFeed {
  const plain = (socket as { encrypted?: boolean }).encrypted !== true && !(socket.timeout !== undefined && socket.timeout > 0);
  const handle = plain ? readFromHandle(socket, onData, false) : undefined;
  if (handle === undefined) {
    socket.on('data', onData);
    return { pause: () => socket.pause(), resume: () => socket.resume() };
  }
  socket.resume();
  return {
    pause() {
      if (handle.reading === false || socket.destroyed) return;
      handle.reading = false;
      handle.readStop();
    },
    resume() {
      if (handle.reading === true || socket.destroyed) return;
      handle.reading = true;
      handle.readStart();
    },
  };
}
