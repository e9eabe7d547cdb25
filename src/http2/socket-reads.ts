// How an HTTP/2 session, either end, reads its socket: every read straight from the socket's native handle (a TLS
// socket's too: its handle hands on the decrypted bytes) to the session, without the stream's push, 'data' event and
// read-ahead tick; the end of the stream and read errors still go through node's own handler, so 'end', 'error' and
// 'close' come as before. A socket with bytes already buffered or other readers keeps 'data' events.

import type { Socket } from 'node:net';

interface ReadHandle {
  readonly isStreamBase?: boolean;
  onread: ((this: ReadHandle, arrayBuffer: ArrayBuffer | undefined) => unknown) | undefined;
}

/** What node's own read handler does first on every read: the idle timeouts of the socket and of those it wraps restart. */
interface TimedSocket {
  _unrefTimer(): void;
}

/** Hands every chunk read from `socket` to `onData`, from now on. HTTP/2 sessions never pause their reads. */
export function readSocket(socket: Socket, onData: (chunk: Buffer) => void): void {
  const handle = (socket as Socket & { _handle?: ReadHandle | null })._handle;
  const streamRead = handle?.onread;
  const timed = socket as unknown as Partial<TimedSocket>;
  const direct =
    handle !== undefined && handle !== null && handle.isStreamBase === true && typeof streamRead === 'function' && typeof timed._unrefTimer === 'function' &&
    !socket.connecting && socket.readableLength === 0 && socket.listenerCount('data') === 0;
  if (!direct) {
    socket.on('data', onData);
    return;
  }
  const socketTimers = timed as TimedSocket;
  // A read of n > 0 bytes arrives as an ArrayBuffer of exactly n bytes; the end and errors arrive without one.
  handle.onread = function onSessionRead(arrayBuffer) {
    if (arrayBuffer === undefined || socket.destroyed) return streamRead.call(this, arrayBuffer);
    socketTimers._unrefTimer();
    onData(Buffer.from(arrayBuffer));
    return undefined;
  };
  // Flowing with no 'data' listener, as a 'data' listener would set it (not a socket paused on purpose): the peer's FIN
  // is still heard ('end').
  if (socket.readableFlowing !== false) socket.resume();
}
