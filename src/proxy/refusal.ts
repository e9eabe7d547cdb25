// A connection the proxy listener does not admit (admission.ts): its one NET:REFUSE event and its 503, written
// on the raw socket before any request is read. The socket is drained, never served, and destroyed soon after.

import type { Socket } from 'node:net';
import type { AuditSink } from '../telemetry/event.js';
import type { RefusedConnectionReason } from '../chain/events.js';
import { writeDenialToSocket } from './answer.js';
import { tooManyConnectionsDenial, tooManyConnectionsFromSourceDenial } from '../chain/denials.js';

export interface RefusalOptions {
  readonly reason: RefusedConnectionReason;
  /** The listener's limit and a source's share of it, for the event and the 503's detail. */
  readonly maxConnections: number;
  readonly perSourceLimit: number;
  readonly sink: AuditSink;
  /** Refused sockets still open: net.Server.close() waits for them, so close() destroys them (issue 15). */
  readonly refused: Set<Socket>;
}

export function refuseConnection(socket: Socket, options: RefusalOptions): void {
  const { reason, maxConnections, perSourceLimit, refused } = options;
  const fromSource = reason === 'too-many-connections-from-source';
  options.sink.emit({
    class: 'NET',
    activity: 'REFUSE',
    severity: 'MED',
    action: 'DENIED',
    src: { ...(socket.remoteAddress === undefined ? {} : { ip: socket.remoteAddress }), ...(socket.remotePort === undefined ? {} : { port: socket.remotePort }) },
    message: fromSource
      ? `connection refused: this source holds its share of ${perSourceLimit} of ${maxConnections} connections`
      : `connection refused: ${maxConnections} connections open`,
    detail: reason,
    unmapped: { reason_code: reason },
  });
  refused.add(socket);
  socket.once('close', () => refused.delete(socket));
  socket.on('error', () => socket.destroy());
  // Issue 15: unread, the client's request would stay buffered in front of its FIN and the socket never close.
  writeDenialToSocket(socket, fromSource ? tooManyConnectionsFromSourceDenial(perSourceLimit) : tooManyConnectionsDenial(maxConnections));
}
