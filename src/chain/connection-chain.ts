// The connection path (docs/architecture.md#the-connection-chains): the ordered stages a CONNECT and a transparently
// captured connection run before a tunnel opens. They share every stage but how the destination is named and pinned:
// CONNECT by its request line and one resolution, capture by the synthetic mapping DNS handed out.

import type { CredentialSource } from '../credentials/source.js';
import type { HostCache } from '../net/host.js';
import type { SelfAddresses } from '../net/ssrf.js';
import type { SyntheticPool } from '../net/synthetic.js';
import type { PolicyStore } from '../policy/store.js';
import type { DialFunction } from './dial.js';
import type { IdentityGate } from './identity-gate.js';
import type { ProxyMetrics } from '../proxy/metrics.js';
import type { TunnelRegistry } from '../proxy/tunnel.js';
import type { Interception } from '../tls/intercept.js';
import type { ConnectionRequest } from './connection.js';
import { runStages, type Refusal, type Stage } from './stage.js';
import { createAlwaysBlockedStage, type PermanentCheck } from './stages/always-blocked.js';
import { createCaptureCheckStage } from './stages/capture-check.js';
import { createCaptureDestinationStage } from './stages/capture-destination.js';
import { createCaptureMappingStage } from './stages/capture-mapping.js';
import { createConnectDestinationStage } from './stages/connect-destination.js';
import { createConnectHeadStage } from './stages/connect-head.js';
import { createConnectL4Stage } from './stages/connect-l4.js';
import { createDialStage, createStillCurrentStage } from './stages/connection-dial.js';
import { createCredentialGuardStage, createInterceptionStage } from './stages/connection-guards.js';
import { createConnectionIdentityStage } from './stages/connection-identity.js';
import { createConnectionMiddlewareStage } from './stages/connection-middleware.js';
import { createConnectionRouteStage } from './stages/connection-route.js';
import type { DestinationCheck } from './stages/destination.js';

export interface ConnectionChainDeps {
  readonly store: PolicyStore;
  readonly hosts: HostCache | undefined;
  readonly metrics: Pick<ProxyMetrics, 'now' | 'decisionSeconds' | 'upstreamConnectSeconds'>;
  readonly identity: IdentityGate | undefined;
  readonly credentials: CredentialSource;
  readonly interception: Interception;
  readonly tunnels: TunnelRegistry;
  readonly dial: DialFunction | undefined;
  readonly connectTimeoutMs: number;
  readonly allowLoopback: boolean;
  readonly selfAddresses: () => SelfAddresses;
  /** What no policy can open (stages/always-blocked.ts). */
  readonly permanent: PermanentCheck;
  readonly destination: DestinationCheck;
  /** A CONNECT that arrived inside a tunnel. */
  readonly inTunnel: (c: ConnectionRequest) => boolean;
}

export interface ConnectionChain {
  readonly stages: readonly Stage<ConnectionRequest>[];
  run(c: ConnectionRequest): Refusal | undefined | Promise<Refusal | undefined>;
}

function chainOf(stages: readonly Stage<ConnectionRequest>[]): ConnectionChain {
  const settled = (c: ConnectionRequest, refused: Refusal | undefined): Refusal | undefined => {
    if (refused !== undefined) c.settle(refused);
    return refused;
  };
  return {
    stages,
    run(c) {
      const out = runStages(stages, c);
      return out instanceof Promise ? out.then((refused) => settled(c, refused)) : settled(c, out);
    },
  };
}

export function createConnectChain(deps: ConnectionChainDeps): ConnectionChain {
  return chainOf([
    createConnectHeadStage(deps),
    createAlwaysBlockedStage(deps),
    createConnectionIdentityStage(deps),
    createConnectL4Stage(deps),
    createConnectionRouteStage(deps),
    createConnectionMiddlewareStage(),
    createConnectDestinationStage({ check: deps.destination }),
    createInterceptionStage(deps),
    createCredentialGuardStage(),
    createDialStage(deps),
    createStillCurrentStage(deps),
  ]);
}

export function createCaptureChain(deps: ConnectionChainDeps & { readonly pool: SyntheticPool }): ConnectionChain {
  return chainOf([
    createCaptureMappingStage(deps),
    createConnectionIdentityStage(deps),
    createCaptureCheckStage(),
    createConnectionRouteStage(deps),
    createConnectionMiddlewareStage(),
    createCaptureDestinationStage(deps),
    createInterceptionStage(deps),
    createCredentialGuardStage(),
    createDialStage(deps),
    createStillCurrentStage(deps),
  ]);
}
