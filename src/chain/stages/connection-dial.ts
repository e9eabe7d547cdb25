// Stages `dial` and `still-current`: the pinned dial (validated addresses only, in answer order), then the check that
// a reload which landed while resolving or dialling would not have closed this connection once open: only a changed
// decision refuses (denied, another endpoint or inspection, addresses no longer valid), an unrelated reload does not.

import type { Socket } from 'node:net';
import type { PolicyStore } from '../../policy/store.js';
import { type DialFunction, dialPinned, dialRefusalOf } from '../dial.js';
import type { ProxyMetrics } from '../../proxy/metrics.js';
import type { TunnelRegistry } from '../../proxy/tunnel.js';
import type { SelfAddresses } from '../../net/ssrf.js';
import { formatAuthority } from '../../net/host.js';
import { policyChangedDenial } from '../denials.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, denied, refusal, type Refusal, type Stage } from '../stage.js';

export function createDialStage(deps: {
  readonly dial: DialFunction | undefined;
  readonly connectTimeoutMs: number;
  readonly metrics: Pick<ProxyMetrics, 'now' | 'upstreamConnectSeconds'>;
}): Stage<ConnectionRequest> {
  const { dial, connectTimeoutMs, metrics } = deps;
  const failed = (c: ConnectionRequest, err: unknown): Refusal => {
    const { reason, failure, proxyStatus, detail, denial } = dialRefusalOf(formatAuthority(c.host as string, c.port as number), err);
    c.dialFailure = failure;
    c.proxyStatus = proxyStatus;
    return c.adapter === 'connect' ? denied(denial, reason, detail) : refusal('fail', reason, detail, undefined);
  };
  return {
    name: 'dial',
    run(c) {
      // An uninspected tunnel relays bytes: its downloads read into the relay's buffers (chain/bulk-reads.ts).
      const bulkReads = !c.inspect;
      return dialPinned({ addresses: c.addresses, port: c.port as number, name: c.host, dial, timeoutMs: connectTimeoutMs, metrics, bulkReads }).then(
        (upstream: Socket) => {
          c.upstream = upstream;
          return CONTINUE;
        },
        (err: unknown) => failed(c, err),
      );
    },
  };
}

export function createStillCurrentStage(deps: {
  readonly store: PolicyStore;
  readonly tunnels: TunnelRegistry;
  readonly allowLoopback: boolean;
  readonly selfAddresses: () => SelfAddresses;
}): Stage<ConnectionRequest> {
  const { store, tunnels, allowLoopback, selfAddresses } = deps;
  return {
    name: 'still-current',
    run(c) {
      const host = c.host as string;
      const port = c.port as number;
      const current = store.current();
      const pinned = { host, port, addresses: c.addresses, endpointId: c.decision?.endpoint?.id, inspect: c.inspect, identity: c.identity };
      if (current.generation === c.policy?.generation || tunnels.survives(current, pinned, { allowLoopback, selfAddresses: selfAddresses() })) {
        if (!c.socket.destroyed) return CONTINUE;
        c.upstream?.destroy();
        return refusal('fail', 'client-closed', 'client closed before the tunnel opened', undefined);
      }
      c.upstream?.destroy();
      return c.adapter === 'connect'
        ? denied(policyChangedDenial(formatAuthority(host, port)), 'policy-changed', 'policy changed while connecting')
        : refusal('deny', 'policy-changed', 'policy changed while connecting', undefined);
    },
  };
}
