// The request path (docs/architecture.md): the one ordered list of stages every HTTP request runs, whichever adapter
// read it (forward HTTP/1.1, a request inside an inspected tunnel, an HTTP/2 stream, a WebSocket handshake). A new
// inspection is a new stage here. Each stage takes only the dependencies it names.

import type { PlaceholderFamily } from '../credentials/placeholder.js';
import type { CredentialSource } from '../credentials/source.js';
import type { MiddlewareRegistry } from '../middleware/registry.js';
import type { PolicyStore } from '../policy/store.js';
import type { AuthorityParsers } from '../proxy/context.js';
import type { IdentityGate } from './identity-gate.js';
import type { ProxyMetrics } from '../proxy/metrics.js';
import type { ChainRequest } from './request.js';
import { runStages, type Refusal, type Stage } from './stage.js';
import { createAlwaysBlockedStage, type PermanentCheck } from './stages/always-blocked.js';
import { createAuthorityStage } from './stages/authority.js';
import { createBodyHoldStage } from './stages/body-hold.js';
import { createCanonicalStage } from './stages/canonical.js';
import { createCredentialsStage } from './stages/credentials.js';
import { createDestinationStage, type DestinationCheck } from './stages/destination.js';
import { createFramingStage } from './stages/framing.js';
import { createHygieneStage } from './stages/hygiene.js';
import { createIdentityStage } from './stages/identity.js';
import { createL4Stage } from './stages/l4.js';
import { createL7Stage } from './stages/l7.js';
import { createMcpRequestStage } from './stages/mcp-request.js';
import { createMcpRevisionStage } from './stages/mcp-revision.js';
import { createMiddlewareStage } from './stages/middleware.js';
import { createL7UpgradeStage } from './stages/l7-upgrade.js';
import { createUpgradeStage } from './stages/upgrade.js';
import { createUpstreamBodyStage } from './stages/upstream-body.js';
import { createVerdictStage } from './stages/verdict.js';

/** Everything the request stages depend on, built once by the composition root. */
export interface RequestChainDeps {
  readonly store: PolicyStore;
  readonly authorities: AuthorityParsers;
  readonly metrics: Pick<ProxyMetrics, 'now' | 'decisionSeconds'>;
  readonly identity: IdentityGate | undefined;
  readonly credentials: CredentialSource;
  /** What no policy can open (stages/always-blocked.ts). */
  readonly permanent: PermanentCheck;
  /** The placeholder family credentials resolve in (default openshell); the other is refused. */
  readonly placeholderFamily?: PlaceholderFamily | undefined;
  /** The SSRF check behind the one upstream-lookup gate (net/destination.ts). */
  readonly destination: DestinationCheck;
  /** The middleware implementations and their shared capacity (docs/policy.md#network-middlewares). */
  readonly middleware: MiddlewareRegistry;
}

export interface RequestChain {
  readonly stages: readonly Stage<ChainRequest>[];
  /** Runs the request through every stage: its refusal, or undefined when it may go upstream as the stages left it. */
  run(request: ChainRequest): Refusal | undefined | Promise<Refusal | undefined>;
}

export function createRequestChain(deps: RequestChainDeps): RequestChain {
  const bodyHold = createBodyHoldStage();
  const mcpRequest = createMcpRequestStage();
  const l7 = createL7Stage(deps);
  const verdict = createVerdictStage();
  const stages: readonly Stage<ChainRequest>[] = [
    createFramingStage(),
    createAuthorityStage(deps),
    createHygieneStage(),
    createAlwaysBlockedStage(deps),
    createIdentityStage(deps),
    createL4Stage(deps),
    createCanonicalStage(),
    // Any Upgrade on an inspected JSON protocol is refused before an MCP request's revision is looked at.
    createL7UpgradeStage(),
    createMcpRevisionStage(),
    bodyHold,
    mcpRequest,
    l7,
    verdict,
    createUpgradeStage(),
    createDestinationStage({ check: deps.destination }),
    // After the allow (audit too), before any secret is written into the request; a replaced body is read and
    // decided again by the same stages (an MCP one under its revision: the headers that selected it are unchanged).
    createMiddlewareStage({ registry: deps.middleware, reevaluate: [bodyHold, mcpRequest, l7, verdict] }),
    createCredentialsStage(deps),
    createUpstreamBodyStage(deps),
  ];
  const settled = (request: ChainRequest, refused: Refusal | undefined): Refusal | undefined => {
    if (refused !== undefined) request.settle(refused);
    return refused;
  };
  return {
    stages,
    run(request) {
      const out = runStages(stages, request);
      return out instanceof Promise ? out.then((refused) => settled(request, refused)) : settled(request, out);
    },
  };
}
