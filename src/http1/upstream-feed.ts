// How the HTTP/1.1 client reads an upstream socket: straight from a plain TCP socket's native handle, as the server
// reads its clients (server-parser.ts), else from 'data' events (TLS, a socket with bytes already buffered or with
// other readers). Bytes only; the response parser is the caller's.

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

/**
 * Hands every chunk read from `socket` to `onData`. On a plain TCP socket nobody else reads, each read goes from the
 * handle to `onData` without the stream's push, 'data' event and read-ahead tick; the end of the stream and read
 * errors still go through node's own handler, so 'end', 'error' and 'close' come as before.
 */
export function feedBytes(socket: Socket, onData: (chunk: Buffer) => void): ByteFeed {
  const handle = (socket as Socket & { _handle?: ReadHandle | null })._handle;
  const streamRead = handle?.onread;
  const direct =
    handle !== undefined && handle !== null && handle.isStreamBase === true && typeof streamRead === 'function' &&
    (socket as { encrypted?: boolean }).encrypted !== true && !socket.connecting && socket.readableLength === 0 &&
    socket.listenerCount('data') === 0 && !(socket.timeout !== undefined && socket.timeout > 0);
  if (!direct) {
    socket.on('data', onData);
    return { pause: () => socket.pause(), resume: () => socket.resume() };
  }
  // A read of n > 0 bytes arrives as an ArrayBuffer of exactly n bytes; the end and errors arrive without one.
  handle.onread = function onUpstreamRead(arrayBuffer) {
    if (arrayBuffer === undefined || socket.destroyed) return streamRead.call(this, arrayBuffer);
    onData(Buffer.from(arrayBuffer));
    return undefined;
  };
  // Flowing, with no 'data' listener: the upstream's FIN is still heard ('end').
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
