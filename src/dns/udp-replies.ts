// UDP answers held until the event loop has run every datagram of the current receive burst, then sent back to back.
// Each send to a client that has gone to sleep waiting costs a wakeup; answers sent together wake it once per burst
// instead of once per answer (docs/benchmarks.md#fourth-pass-answers-sent-after-the-burst). The end of the turn is
// also the end of whatever else the loop runs in it (the proxy's connections), so after turns whose answers waited
// longer than their own handling explains, answers are sent as they are made for a while (docs/dns.md#wire-responses).

import type { Socket as UdpSocket } from 'node:dgram';
import { GLOBAL_TIMERS, type Timers } from '../shared/timers.js';

/** Answers held at once; one more sends them all at once (a receive burst is up to 32 datagrams in libuv). */
export const MAX_HELD_UDP_REPLIES = 64;
/**
 * Held answers may wait this long for each answer held in the turn: about what a burst's other queries take to be
 * read and answered (10-15 µs each on the bench host), with room for a loaded machine. A turn that held them longer
 * ran other work too.
 */
export const MAX_HOLD_MS_PER_REPLY = 0.05;
/**
 * Turns in a row that held answers longer, before answers are sent as they are made: one such turn is a collection
 * or a preemption, and happens now and then at any load; a busy proxy makes every turn one.
 */
export const SLOW_TURNS_TO_SEND_AT_ONCE = 3;
/** Then answers are sent as they are made for this long, and held again after it. */
export const SEND_AT_ONCE_MS = 1_000;

export interface UdpReplies {
  /** Sends `response` to `address`:`port` from `socket`, by the end of this loop turn, in the order given. */
  send(socket: UdpSocket, response: Uint8Array, port: number, address: string): void;
  /** Sends every held answer now (before the socket closes). */
  flush(): void;
}

/** `onError` gets a send's synchronous throw (a socket already closed); asynchronous errors reach the socket's 'error'. */
export function createUdpReplies(onError: (err: unknown) => void, timers: Timers = GLOBAL_TIMERS): UdpReplies {
  const sockets: UdpSocket[] = [];
  const responses: Uint8Array[] = [];
  const ports: number[] = [];
  const addresses: string[] = [];
  let scheduled: NodeJS.Immediate | undefined;
  /** When the turn's first answer was held. */
  let heldSince = 0;
  let holding = true;
  /** Turns in a row whose answers were held longer than their handling explains. */
  let slowTurns = 0;
  const holdAgain = (): void => {
    holding = true;
  };

  function sendNow(socket: UdpSocket, response: Uint8Array, port: number, address: string): void {
    try {
      socket.send(response, port, address);
    } catch (err) {
      onError(err);
    }
  }

  function flush(): void {
    if (scheduled !== undefined) {
      clearImmediate(scheduled);
      scheduled = undefined;
    }
    const held = responses.length;
    if (held === 0) return;
    if (timers.now() - heldSince <= held * MAX_HOLD_MS_PER_REPLY) slowTurns = 0;
    else if (++slowTurns >= SLOW_TURNS_TO_SEND_AT_ONCE) {
      slowTurns = 0;
      holding = false;
      timers.setTimeout(holdAgain, SEND_AT_ONCE_MS);
    }
    for (let i = 0; i < held; i++) sendNow(sockets[i] as UdpSocket, responses[i] as Uint8Array, ports[i] as number, addresses[i] as string);
    sockets.length = 0;
    responses.length = 0;
    ports.length = 0;
    addresses.length = 0;
  }

  return {
    send(socket, response, port, address) {
      if (!holding) return sendNow(socket, response, port, address);
      if (responses.length === 0) heldSince = timers.now();
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
