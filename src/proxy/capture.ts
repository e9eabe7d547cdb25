// Transparent capture (docs/destinations.md#transparent-capture): a connection accepted on (synthetic IP, port) is named
// by its local address, re-decided against the current policy by the capture chain (chain/connection-chain.ts) and
// dialled to the mapping's pinned real addresses only, then run as a CONNECT tunnel would be. Never resolves a name;
// the SNI never picks the destination.

import type { Socket } from 'node:net';
import { ConnectionRequest } from '../chain/connection.js';
import type { ConnectionChain } from '../chain/connection-chain.js';
import { captureEvent, connectionOutcome } from '../chain/event.js';
import type { Mapping, MappingRoute, SyntheticLookup } from '../net/synthetic.js';
import { decide } from '../policy/decide.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { Decision, Endpoint, Policy } from '../policy/types.js';
import { openedOf, runConnectionChain, startTunnel } from './connect.js';
import type { ProxyContext } from './context.js';
import { findingEvent, type OutcomeReason, type ReasonCode } from './events.js';
import { sniGatedRelay } from './sni-gate.js';

/** Metric `reason` labels capture adds to the proxy's closed sets. */
export const CAPTURE_REASONS = ['mapping-missing', 'mapping-expired', 'stale-policy', 'port-mismatch', 'destination-denied'] as const satisfies readonly OutcomeReason[];

type CaptureCheck =
  | { readonly ok: true; readonly mapping: Mapping; readonly route: MappingRoute; readonly decision: Decision; readonly endpoint: Endpoint }
  | {
      readonly ok: false;
      readonly reason: ReasonCode;
      readonly message: string;
      readonly mapping?: Mapping;
      readonly decision?: Decision;
    };

/**
 * Steps 1-4 of docs/destinations.md#transparent-capture, pure: the mapping the local address names, and whether the current policy still
 * allows (name, port) through an endpoint that made the name eligible. A mapping from an older policy
 * generation stays usable exactly as long as the new policy allows it.
 */
export function checkCapture(policy: Policy, found: SyntheticLookup, port: number, identity?: IdentityClaim): CaptureCheck {
  if (found.state === 'missing') {
    return { ok: false, reason: 'mapping-missing', message: 'no synthetic mapping for this address in this epoch' };
  }
  const { mapping } = found;
  if (found.state === 'expired') {
    return { ok: false, reason: 'mapping-expired', message: `mapping for ${mapping.name} expired`, mapping };
  }
  const route = mapping.routes.find((r) => r.port === port);
  if (route === undefined) {
    return { ok: false, reason: 'port-mismatch', message: `port ${port} is not in the mapping of ${mapping.name}`, mapping };
  }
  const decision = decide(policy, { adapter: 'capture', host: mapping.name, port, identity });
  const inSet = (e: Endpoint | undefined): e is Endpoint => e !== undefined && route.endpointIds.includes(e.id);
  const endpoint = decision.verdict === 'deny' ? undefined : inSet(decision.endpoint) ? decision.endpoint : decision.endpoints.find(inSet);
  if (endpoint === undefined) {
    const stale = mapping.policyGeneration !== policy.generation;
    return {
      ok: false,
      reason: stale ? 'stale-policy' : decision.verdict === 'deny' ? decision.reason : 'destination-denied',
      message: decision.verdict === 'deny' ? decision.detail : `no endpoint of the decision made ${mapping.name} eligible (DNS correlation)`,
      mapping,
      decision,
    };
  }
  return { ok: true, mapping, route, decision, endpoint };
}

/** The ports of a mapping that the policy still allows: the listeners that should exist. */
export function allowedPorts(policy: Policy, mapping: Mapping): number[] {
  return mapping.ports.filter((port) => checkCapture(policy, { state: 'live', mapping }, port).ok);
}

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
      const opened = openedOf(c);
      const refuseSni = (problem: string): void => {
        ctx.sink.emit(findingEvent({ ...o, engine: 'tls', detail: problem }, 'sni-mismatch'));
      };
      startTunnel(ctx, socket, Buffer.alloc(0), opened, o, opened.inspect ? undefined : sniGatedRelay(opened.host, refuseSni));
    });
  };
}
