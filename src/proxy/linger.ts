// Lingering close (RFC 9112 section 9.6): once the proxy has written its last answer on a connection (a 503
// refusal, a 400/408/431, a refusal written before the request body was read), the socket is given a bounded
// moment before it is destroyed. Destroyed at once, unread bytes make the kernel send a reset, and the client's
// kernel drops the answer before the client reads it; a pending write on a TLS socket is lost as well.

import type { Socket } from 'node:net';

/** How long such a socket may take to deliver its answer and see the client close before it is destroyed anyway. */
export const LINGER_MS = 1_000;

/** Destroys `socket` LINGER_MS from now unless it has closed by then. */
export function destroyAfterLinger(socket: Socket): void {
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
}
