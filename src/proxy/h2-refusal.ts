// HTTP/2 by prior knowledge sent to the forward proxy itself, not through CONNECT (docs/destinations.md#http2): the
// HTTP/1.1 listener cannot hand the socket on, so the connection is refused in HTTP/2 terms (GOAWAY
// HTTP_1_1_REQUIRED, which clients read as "retry over HTTP/1.1") with one decision event. Nothing goes upstream.

import type { Socket } from 'node:net';
import { HTTP_1_1_REQUIRED, refusalBytes } from '../http2/goaway.js';
import type { ProxyContext } from './context.js';
import { beginOutcome, emitOutcome, settle } from '../chain/events.js';
import { destroyAfterLinger } from './linger.js';

const DETAIL = 'HTTP/2 by prior knowledge to the forward proxy: use CONNECT, or HTTP/1.1';

export function refuseH2Preface(ctx: ProxyContext, socket: Socket): void {
  const o = beginOutcome('forward', 'http', socket);
  o.method = 'PRI';
  settle(o, 'deny', 'unsupported-l7-protocol', DETAIL, undefined);
  o.extra = { http_version: '2' };
  emitOutcome(ctx.sink, ctx.metrics, o);
  destroyAfterLinger(socket);
  socket.end(refusalBytes(HTTP_1_1_REQUIRED, `unsupported_l7_protocol: ${DETAIL}`));
}
