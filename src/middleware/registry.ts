// The middleware implementations a boundary has: the built-ins, and one gRPC service per operator registration
// (--middleware-config). It names the registered services to the policy parser, has a policy's configs validated by
// their services before the policy is applied, and hands the chain each entry's implementation. gRPC is loaded only
// once a service is registered. Emits CONFIG events, without any text of a service's.

import { type CredentialSource, createStaticCredentialSource } from '../credentials/source.js';
import type { Registry } from '../telemetry/prom.js';
import type { MiddlewareEntry, Policy } from '../policy/types.js';
import { BoundaryError, type Issue, isBoundaryError } from '../shared/errors.js';
import { GLOBAL_TIMERS, type Timers } from '../shared/timers.js';
import type { AuditSink } from '../telemetry/event.js';
import { createCounter, createHistogram } from '../telemetry/metrics.js';
import { createMiddlewareCapacity, type MiddlewareCapacity } from './capacity.js';
import type { MiddlewareImplementation } from './implementation.js';
import { loadMiddlewareProtocol, type MiddlewareProtocol } from './proto.js';
import { REGEX_MIDDLEWARE } from './regex.js';
import { createReverseCanary } from './reverse-canary.js';
import { createSecretScan } from './secret-scan.js';
import type { MiddlewareRegistration } from './registrations.js';
import { MIDDLEWARE_CALLS, MIDDLEWARE_METRICS } from './metric-specs.js';
import { type CallMetrics, createMiddlewareService, type MiddlewareService } from './service.js';

export interface MiddlewareRegistry {
  /** Names of the registered services, for the policy parser (ParseOptions.middlewareServices). */
  names(): readonly string[];
  /** What `entry` runs; undefined when its service is not registered (any more). */
  implementationFor(entry: MiddlewareEntry): MiddlewareImplementation | undefined;
  /** Every selected stage waits here for a turn to hold a body. */
  readonly capacity: MiddlewareCapacity;
  /** Makes `registrations` the registered services (services no longer named close) and shakes hands with new ones. */
  replace(registrations: readonly MiddlewareRegistration[]): Promise<void>;
  /**
   * Asks each registered service named by `policy` to validate its entry's config. Throws POLICY_INVALID listing every
   * entry refused (POLICY_MIDDLEWARE_CONFIG) or not validated (MIDDLEWARE_HANDSHAKE_FAILED, MIDDLEWARE_UNAVAILABLE):
   * such a policy is not applied.
   */
  admit(policy: Policy): Promise<void>;
  close(): void;
}

export interface MiddlewareRegistryDeps {
  /** Where handshake and validation outcomes go; none in tests that only need the built-ins. */
  readonly sink?: AuditSink;
  readonly version?: string;
  /** Where the service call metrics go (middleware/metric-specs.ts); none: not recorded. */
  readonly metrics?: Registry;
  /** Milliseconds, for call durations. */
  readonly now?: () => number;
  readonly timers?: Timers;
  /** Replaces the shared capacity (tests make it small). */
  readonly capacity?: MiddlewareCapacity;
  /** The values the reverse canary watches; none: it lets everything pass. */
  readonly credentials?: CredentialSource | undefined;
}

export function createMiddlewareRegistry(deps: MiddlewareRegistryDeps = {}): MiddlewareRegistry {
  const timers = deps.timers ?? GLOBAL_TIMERS;
  // A scanner's regexes are compiled once per entry of a policy (entries are replaced, never changed, on reload).
  const scanners = new WeakMap<MiddlewareEntry, MiddlewareImplementation>();
  const canary = createReverseCanary(deps.credentials ?? createStaticCredentialSource({ providers: [] }));
  let services = new Map<string, MiddlewareService>();
  let names: readonly string[] = [];
  let protocol: Promise<MiddlewareProtocol> | undefined;
  let callMetrics: CallMetrics | undefined;
  /** Created with the first service: a boundary without one exposes no middleware series. */
  function metricsOf(): CallMetrics {
    callMetrics ??= deps.metrics === undefined ? { record: () => undefined } : createCallMetrics(deps.metrics);
    return callMetrics;
  }

  function event(activity: 'LOADED' | 'FAILED', message: string, unmapped: Record<string, unknown>): void {
    deps.sink?.emit({ class: 'CONFIG', activity, severity: activity === 'LOADED' ? 'INFO' : 'MED', engine: 'middleware', message, unmapped });
  }

  async function handshake(service: MiddlewareService): Promise<void> {
    const { name, endpoint } = service.registration;
    try {
      const profile = await service.describe();
      event('LOADED', `middleware service ${name} at ${endpoint} described its bindings`, { middleware: name, bindings: [...profile.keys()] });
    } catch (err) {
      // Not fatal here: the policy that names the service is refused until a handshake succeeds (admit).
      event('FAILED', isBoundaryError(err) ? err.message : `middleware service ${name} handshake failed`, { middleware: name, error: isBoundaryError(err) ? err.code : 'MIDDLEWARE_UNAVAILABLE' });
    }
  }

  async function validate(entry: MiddlewareEntry): Promise<Issue | undefined> {
    const path = `network_middlewares.${entry.key}`;
    const service = services.get(entry.middleware);
    if (service === undefined) return { code: 'POLICY_MIDDLEWARE_EXTERNAL', path: `${path}.middleware`, message: `entry ${entry.key}: no middleware service named ${entry.middleware} is registered` };
    let valid: boolean;
    try {
      valid = await service.validateConfig(entry);
    } catch (err) {
      const code = isBoundaryError(err) ? err.code : 'MIDDLEWARE_UNAVAILABLE';
      const message = isBoundaryError(err) ? err.message : `middleware service ${entry.middleware} could not validate the config`;
      event('FAILED', `config of middleware entry ${entry.key} not validated: ${message}`, { middleware: entry.middleware, entry: entry.key, result: 'unavailable' });
      return { code, path: `${path}.middleware`, message: `entry ${entry.key}: ${message}` };
    }
    event(valid ? 'LOADED' : 'FAILED', `middleware service ${entry.middleware} ${valid ? 'accepted' : 'refused'} the config of entry ${entry.key}`, {
      middleware: entry.middleware,
      entry: entry.key,
      result: valid ? 'valid' : 'invalid',
    });
    if (valid) return undefined;
    return { code: 'POLICY_MIDDLEWARE_CONFIG', path: `${path}.config`, message: `middleware service ${entry.middleware} refused the config of entry ${entry.key}; its own log says why` };
  }

  return {
    names: () => names,
    implementationFor(entry) {
      switch (entry.builtin) {
        case 'regex':
          return REGEX_MIDDLEWARE;
        case 'secret-scan': {
          const known = scanners.get(entry);
          if (known !== undefined) return known;
          const made = createSecretScan(entry);
          scanners.set(entry, made);
          return made;
        }
        case 'reverse-canary':
          return canary;
        case undefined:
          return services.get(entry.middleware)?.implementation;
      }
    },
    capacity: deps.capacity ?? createMiddlewareCapacity(),
    async replace(registrations) {
      const next = new Map<string, MiddlewareService>();
      const fresh: MiddlewareService[] = [];
      if (registrations.length > 0) protocol ??= loadMiddlewareProtocol();
      for (const registration of registrations) {
        const kept = services.get(registration.name);
        if (kept !== undefined && JSON.stringify(kept.registration) === JSON.stringify(registration)) {
          next.set(registration.name, kept);
          continue;
        }
        const service = createMiddlewareService(registration, { protocol: await (protocol as Promise<MiddlewareProtocol>), timers, version: deps.version ?? '', metrics: metricsOf(), now: deps.now ?? (() => 0) });
        next.set(registration.name, service);
        fresh.push(service);
      }
      for (const [name, old] of services) if (next.get(name) !== old) old.close();
      services = next;
      names = [...next.keys()];
      await Promise.all(fresh.map(handshake));
    },
    async admit(policy) {
      const external = policy.middlewares.filter((m) => m.builtin === undefined);
      if (external.length === 0) return;
      const issues = (await Promise.all(external.map(validate))).filter((i): i is Issue => i !== undefined);
      if (issues.length === 0) return;
      const lines = issues.map((i) => `  ${i.path}: ${i.message} (${i.code})`).join('\n');
      throw new BoundaryError('POLICY_INVALID', `policy is invalid (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${lines}`, { issues });
    },
    close() {
      for (const service of services.values()) service.close();
      services = new Map();
      names = [];
    },
  };
}

function createCallMetrics(registry: Registry): CallMetrics {
  const calls = createCounter(registry, MIDDLEWARE_METRICS.boundary_middleware_service_calls_total);
  const seconds = createHistogram(registry, MIDDLEWARE_METRICS.boundary_middleware_service_call_seconds);
  const observers = new Map(MIDDLEWARE_CALLS.map((call) => [call, seconds.bind({ call })]));
  return {
    record(call, result, elapsed) {
      calls.inc({ call, result });
      observers.get(call)?.observe(elapsed);
    },
  };
}
