// The credential source with token grants: wraps the file source, runs one GrantRunner per declared grant, and
// publishes the file's providers with each grant's current token as a key. A new token is a new revision under the
// same key, so the workload keeps one placeholder across rotations and every scan, redaction and binding applies.

import type { Registry } from 'prom-client';
import { sameGrant } from '../credentials/grant.js';
import type { Secret } from '../credentials/secret.js';
import type { CredentialSet, ProviderInput } from '../credentials/set.js';
import { type CredentialSource, createSetHolder } from '../credentials/source.js';
import type { Timers } from '../shared/timers.js';
import type { Logger } from '../telemetry/logger.js';
import { createCounter, createGauge } from '../telemetry/metrics.js';
import { GRANT_METRICS } from './metric-specs.js';
import { createGrantRunner, type GrantRunner, type GrantStatus } from './runner.js';
import type { TokenClientDeps } from './token-client.js';

export interface GrantingSource extends CredentialSource {
  /** Starts the first token requests (after --upstream-ca is read); grants declared later start at once. */
  start(): void;
  /** Every grant's state, for /readyz and the metrics. */
  statuses(): readonly GrantStatus[];
}

export function createGrantingSource(
  inner: CredentialSource,
  deps: { readonly client: TokenClientDeps; readonly timers: Timers; readonly logger: Logger; readonly registry: Registry },
): GrantingSource {
  const runners = new Map<string, GrantRunner>();
  let started = false;
  const requests = createCounter(deps.registry, GRANT_METRICS.boundary_token_grant_requests_total);
  const shown = new Set<string>();
  createGauge(deps.registry, GRANT_METRICS.boundary_token_grant_usable_seconds, {
    collect(gauge) {
      const now = new Set<string>();
      for (const s of statuses()) {
        now.add(`${s.provider}\u0000${s.key}`);
        gauge.set({ provider: s.provider, key: s.key }, s.usableForSeconds);
      }
      // A grant removed from the file reads 0 from then on rather than its last figure.
      for (const id of shown) {
        const [provider = '', key = ''] = id.split('\u0000');
        if (!now.has(id)) gauge.set({ provider, key }, 0);
      }
      for (const id of now) shown.add(id);
    },
  });

  function providersOf(set: CredentialSet): ProviderInput[] {
    return [...set.providers.values()].map((provider) => {
      const env: Record<string, Secret> = Object.fromEntries(provider.keys);
      for (const grant of provider.grants) {
        const token = runners.get(`${provider.name}\u0000${grant.key}`)?.token();
        if (token !== undefined) env[grant.key] = token;
      }
      // Everything else of the provider as the file gave it: its client certificate and placeholder formats too.
      const { clientCertificate, formats } = provider;
      return { name: provider.name, env, endpoints: provider.endpoints, grants: provider.grants, clientCertificate, formats: Object.fromEntries(formats) };
    });
  }

  const holder = createSetHolder(inner.current());
  const publish = (): void => {
    try {
      holder.offer(providersOf(inner.current()));
    } catch (err) {
      // Cannot happen with a set the file source validated; the last good set stays current if it does.
      deps.logger.error({ err }, 'token grant: the credentials with the new token failed validation');
    }
  };

  /** Keeps the runner of every grant whose definition and secrets are unchanged (its token and rotated refresh token too). */
  function reconcile(set: CredentialSet): void {
    const wanted = new Set<string>();
    for (const provider of set.providers.values()) {
      for (const grant of provider.grants) {
        const id = `${provider.name}\u0000${grant.key}`;
        wanted.add(id);
        const existing = runners.get(id);
        if (existing !== undefined && sameGrant(existing.grant, grant)) continue;
        existing?.stop();
        const runner = createGrantRunner(provider.name, grant, {
          client: deps.client,
          timers: deps.timers,
          logger: deps.logger,
          changed: publish,
          counted: (p, key, outcome) => requests.inc({ outcome, provider: p, key }),
        });
        runners.set(id, runner);
        if (started) runner.start();
      }
    }
    for (const [id, runner] of runners) {
      if (wanted.has(id)) continue;
      runner.stop();
      runners.delete(id);
    }
  }

  function statuses(): GrantStatus[] {
    return [...runners.values()].map((runner) => runner.status());
  }

  reconcile(inner.current());
  const unsubscribe = inner.subscribe((next) => {
    reconcile(next);
    publish();
  });

  return {
    current: holder.current,
    subscribe: holder.subscribe,
    statuses,
    start() {
      if (started) return;
      started = true;
      for (const runner of runners.values()) runner.start();
    },
    async close() {
      unsubscribe();
      for (const runner of runners.values()) runner.stop();
      await inner.close();
    },
  };
}
