// Transparent capture (docs/destinations.md#transparent-capture): a connection accepted on (synthetic IP, port) is named
// by its local address, re-decided against the current policy by the capture chain (chain/connection-chain.ts) and
// dialled to the mapping's pinned real addresses only, then run as a CONNECT tunnel would be. Never resolves a name;
// the SNI never picks the destination.

import type { Socket } from 'node:net';
import { ConnectionRequest } from '../chain/connection.js';
import type { ConnectionChain } from '../chain/connection-chain.js';
import { captureEvent, connectionOutcome } from '../chain/event.js';
import { openedOf, runConnectionChain, startTunnel, uninspectedRelayFinding } from './connect.js';
import type { ProxyContext } from './context.js';
import { findingEvent } from '../chain/events.js';
import { sniGatedRelay } from './sni-gate.js';

/** The connection handler of every capture listener: the capture chain decides and dials, then the tunnel runs. */
export function createCaptureHandler(options: { readonly ctx: ProxyContext; readonly chain: ConnectionChain }) {
  const { ctx, chain } = options;
  return function handleCapture(socket: Socket): void {
    socket.on('error', () => socket.destroy());
    const c = new ConnectionRequest({ adapter: 'capture', socket });
    void runConnectionChain(ctx, chain, c, 'transparent capture failed').then((refused) => {
      // docs/destinations.md#transparent-capture: a refused capture is closed with no reply; the client sees the connection drop.
      if (refused !== undefined) socket.destroy();
      else {
        const decision = c.decision!;
        c.allow(decision.verdict === 'audit' ? 'audit' : 'allow', decision.reason, decision.detail, undefined);
      }
      ctx.metrics.countDecision('capture', c.settled!.verdict, c.settled!.reason);
      const event = captureEvent(c);
      ctx.sink.emit(event);
      const o = connectionOutcome(c);
      if (refused?.finding !== undefined) ctx.sink.emit(findingEvent(o, refused.finding));
      if (refused !== undefined) return;
      uninspectedRelayFinding(ctx, c, o);
      const opened = openedOf(c);
      const refuseSni = (problem: string): void => {
        ctx.sink.emit(findingEvent({ ...o, engine: 'tls', detail: problem }, 'sni-mismatch'));
      };
      startTunnel(ctx, socket, Buffer.alloc(0), opened, o, opened.inspect ? undefined : sniGatedRelay(opened.host, refuseSni));
    });
  };
}
