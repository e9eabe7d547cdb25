// The current Policy and its generation: swap() stamps the next generation (previous + 1, or the supervisor's when
// attached and newer) and notifies subscribers. Holds no other state. emptyPolicy() is the deny-all policy every boundary starts with (fail closed).

import type { Issue } from '../shared/errors.js';
import { policyHash } from './parse.js';
import type { Endpoint, MiddlewareEntry, Policy } from './types.js';

export interface PolicyStore {
  current(): Policy;
  /** False until the first swap(): readiness reports it, and decide() on the empty policy says `no-policy`. */
  hasPolicy(): boolean;
  /**
   * Makes `policy` current and returns the stamped copy. Its generation is `generation` when given and newer than
   * the current one (attached mode: the supervisor's, so both ends name one number), else previous + 1. Generations
   * only grow: DNS answers and synthetic mappings are cached per generation.
   */
  swap(policy: Policy, generation?: number): Policy;
  subscribe(listener: (next: Policy, previous: Policy) => void): () => void;
}

const NO_ENDPOINTS: readonly Endpoint[] = Object.freeze([]);
const NO_MIDDLEWARES: readonly MiddlewareEntry[] = Object.freeze([]);

/** The deny-all policy (reason `no-policy`), generation 0. Its hash equals that of an empty network policy. */
export function emptyPolicy(): Policy {
  return Object.freeze({
    generation: 0,
    hash: policyHash([]),
    entries: Object.freeze([]),
    endpoints: NO_ENDPOINTS,
    warnings: Object.freeze([]),
    notEnforced: Object.freeze([]),
    endpointsForHost: () => NO_ENDPOINTS,
    middlewares: Object.freeze([]),
    middlewaresFor: () => NO_MIDDLEWARES,
  });
}

/** A frozen copy of `policy` stamped with `generation`; compiled parts are shared. */
export function withGeneration(policy: Policy, generation: number): Policy {
  if (!Number.isSafeInteger(generation) || generation < 0) throw new RangeError(`generation must be a non-negative integer`);
  return Object.freeze({ ...policy, generation });
}

export function createPolicyStore(): PolicyStore {
  let current = emptyPolicy();
  let loaded = false;
  const listeners = new Set<(next: Policy, previous: Policy) => void>();
  return {
    current: () => current,
    hasPolicy: () => loaded,
    swap(policy: Policy, generation?: number): Policy {
      const previous = current;
      const stamp = generation !== undefined && Number.isSafeInteger(generation) && generation > previous.generation ? generation : previous.generation + 1;
      const next = withGeneration(policy, stamp);
      current = next;
      loaded = true;
      // A throwing listener must not stop the others from seeing the new generation.
      const failures: unknown[] = [];
      for (const listener of [...listeners]) {
        try {
          listener(next, previous);
        } catch (err) {
          failures.push(err);
        }
      }
      if (failures.length > 0) throw new AggregateError(failures, 'a policy subscriber failed');
      return next;
    },
    subscribe(listener) {
      const wrapped = (next: Policy, previous: Policy): void => listener(next, previous);
      listeners.add(wrapped);
      return function unsubscribe() {
        listeners.delete(wrapped);
      };
    },
  };
}

/**
 * V15: problems with applying `next` on a running boundary that started with `previous`. Adding the first
 * `protocol: tcp` endpoint needs transparent capture, which is installed at start unless it can be added live.
 */
export function reloadIssues(previous: Policy, next: Policy, options: { liveCapture: boolean }): readonly Issue[] {
  if (options.liveCapture) return [];
  const hadTcp = previous.endpoints.some((e) => e.protocol === 'tcp');
  const first = next.endpoints.find((e) => e.protocol === 'tcp');
  if (hadTcp || first === undefined) return [];
  return [
    {
      code: 'POLICY_TCP_RELOAD',
      path: `network_policies.${first.policy}.endpoints[${first.index}]`,
      message: 'the first protocol tcp endpoint needs transparent capture, which is set up only at start; restart the boundary',
    },
  ];
}
