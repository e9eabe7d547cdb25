// One connection-level request (a CONNECT, or a transparently captured connection) as the connection chain reads it
// and as its stages record what they found. The NET decision event is built from these fields alone (event.ts).

import type { Socket } from 'node:net';
import type { HostForm } from '../net/host.js';
import type { LookupRefusal } from '../net/lookup-gate.js';
import type { Mapping, MappingRoute, SyntheticLookup } from '../net/synthetic.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { Decision, Endpoint, Policy } from '../policy/types.js';
import type { DialFailure } from './dial.js';
import type { OutcomeVerdict, ReasonCode } from './events.js';
import type { DestinationFacts, Settled } from './request.js';
import type { Refusal } from './stage.js';
import type { MiddlewareRoute } from './middleware-route.js';

export class ConnectionRequest {
  readonly adapter: 'connect' | 'capture';
  /** The workload's socket. */
  readonly socket: Socket;
  readonly src: { readonly ip: string | undefined; readonly port: number | undefined };
  // CONNECT: the request line and head; capture: the accepted socket's local address
  readonly url: string;
  readonly rawHeaders: readonly string[];
  host: string | undefined = undefined;
  port: number | undefined = undefined;
  hostForm: HostForm | undefined = undefined;
  policy: Policy | undefined = undefined;
  identity: IdentityClaim | undefined = undefined;
  decision: Decision | undefined = undefined;
  /** The endpoint the connection is pinned to (capture: one that made its name eligible). */
  endpoint: Endpoint | undefined = undefined;
  /** TLS is terminated and requests decided one by one (an L7 protocol, or credentials bound to the route). */
  inspect = false;
  credentialRoute: 'as-is' | 'inspect' | 'refuse' = 'as-is';
  /** What network middlewares selecting the host make of the connection (chain/middleware-route.ts). */
  middlewareRoute: MiddlewareRoute = 'none';
  // capture
  readonly syntheticIp: string;
  readonly syntheticPort: number;
  lookup: SyntheticLookup | undefined = undefined;
  mapping: Mapping | undefined = undefined;
  mappingRoute: MappingRoute | undefined = undefined;
  // destination and dial
  addresses: readonly string[] = [];
  destinationFacts: DestinationFacts | undefined = undefined;
  /** The lookup gate kept the name from the upstream resolver. */
  lookupRefusal: LookupRefusal | undefined = undefined;
  upstream: Socket | undefined = undefined;
  dialFailure: DialFailure | undefined = undefined;
  /** The upstream proxy's status when it refused the CONNECT. */
  proxyStatus: number | undefined = undefined;
  settled: Settled | undefined = undefined;

  constructor(init: { readonly adapter: 'connect' | 'capture'; readonly socket: Socket; readonly url?: string; readonly rawHeaders?: readonly string[] }) {
    this.adapter = init.adapter;
    this.socket = init.socket;
    this.src = { ip: init.socket.remoteAddress, port: init.socket.remotePort };
    this.url = init.url ?? '';
    this.rawHeaders = init.rawHeaders ?? [];
    this.syntheticIp = init.socket.localAddress ?? '';
    this.syntheticPort = init.socket.localPort ?? 0;
  }

  settle(result: Refusal | Settled): void {
    this.settled = { verdict: result.verdict, reason: result.reason, detail: result.detail, status: result.status };
  }

  /** The allow that opened the connection. */
  allow(verdict: OutcomeVerdict, reason: ReasonCode, detail: string, status: number | undefined): void {
    this.settled = { verdict, reason, detail, status };
  }
}
