// How an HTTP/2 session, either end, reads its socket: every read straight from the socket's native handle (a TLS
// socket's too: its handle hands on the decrypted bytes) to the session (http1/upstream-feed.ts's readFromHandle).
// A socket with bytes already buffered or other readers keeps 'data' events.

import type { Socket } from 'node:net';
import { readFromHandle } from '../http1/upstream-feed.js';

/** Hands every chunk read from `socket` to `onData`, from now on. HTTP/2 sessions never pause their reads. */
export function readSocket(socket: Socket, onData: (chunk: Buffer) => void): void {
  if (readFromHandle(socket, onData, true) === undefined) socket.on('data', onData);
  // Flowing with no 'data' listener, as a 'data' listener would set it (not a socket paused on purpose).
  else if (socket.readableFlowing !== false) socket.resume();
}
