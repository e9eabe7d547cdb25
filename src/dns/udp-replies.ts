// UDP answers held until the event loop has run every datagram of the current receive burst, then sent back to back.
// Each send to a client that has gone to sleep waiting costs a wakeup; answers sent together wake it once per burst
// instead of once per answer (docs/benchmarks.md#fourth-pass-answers-sent-after-the-burst). An answer waits for the
// rest of its loop turn (docs/dns.md#wire-responses): on an idle loop, for nothing.

import type { Socket as UdpSocket } from 'node:dgram';

/** Answers held at once; one more sends them all at once (a receive burst is up to 32 datagrams in libuv). */
export const MAX_HELD_UDP_REPLIES = 64;

export interface UdpReplies {
  /** Sends `response` to `address`:`port` from `socket` by the end of this loop turn, in the order given. */
  send(socket: UdpSocket, response: Uint8Array, port: number, address: string): void;
  /** Sends every held answer now (before the socket closes). */
  flush(): void;
}

/** `onError` gets a send's synchronous throw (a socket already closed); asynchronous errors reach the socket's 'error'. */
export function createUdpReplies(onError: (err: unknown) => void): UdpReplies {
  const sockets: UdpSocket[] = [];
  const responses: Uint8Array[] = [];
  const ports: number[] = [];
  const addresses: string[] = [];
  let scheduled: NodeJS.Immediate | undefined;

  function flush(): void {
    if (scheduled !== undefined) {
      clearImmediate(scheduled);
      scheduled = undefined;
    }
    for (let i = 0; i < responses.length; i++) {
      try {
        (sockets[i] as UdpSocket).send(responses[i] as Uint8Array, ports[i] as number, addresses[i] as string);
      } catch (err) {
        onError(err);
      }
    }
    sockets.length = 0;
    responses.length = 0;
    ports.length = 0;
    addresses.length = 0;
  }

  return {
    send(socket, response, port, address) {
      sockets.push(socket);
      responses.push(response);
      ports.push(port);
      addresses.push(address);
      if (responses.length >= MAX_HELD_UDP_REPLIES) flush();
      else scheduled ??= setImmediate(flush);
    },
    flush,
  };
}
