// One token grant kept fresh: the first fetch, a refresh ahead of expiry, retries with capped backoff after a
// failure, and the token dropped once it is too close to expiry to be sent. One request in flight at a time.
// Runs on the injected timers; reports changes through `changed` and never logs a secret.

import type { TokenGrantInput } from '../credentials/grant.js';
import type { Secret } from '../credentials/secret.js';
import type { Timers } from '../shared/timers.js';
import type { Logger } from '../telemetry/logger.js';
import { requestToken, type TokenClientDeps, type TokenFailure } from './token-client.js';

/** A token is sent until its expiry less this (clock skew, time in flight); half its lifetime for short ones. */
export const TOKEN_EXPIRY_SKEW_MS = 30_000;
/** The refresh starts this far into a token's usable lifetime, leaving the rest for retries. */
export const REFRESH_AT_FRACTION = 0.75;
/** First retry after a failed request; each further failure doubles it up to RETRY_MAX_MS. */
export const RETRY_INITIAL_MS = 1_000;
export const RETRY_MAX_MS = 60_000;

export type GrantState = 'fetching' | 'valid' | 'refresh-failing' | 'unavailable';

export interface GrantStatus {
  readonly provider: string;
  readonly key: string;
  readonly state: GrantState;
  /** Seconds until the current token stops being sent (0 without one). */
  readonly usableForSeconds: number;
  /** Failed requests since the last success. */
  readonly failures: number;
  readonly lastFailure: TokenFailure | undefined;
}

export interface GrantRunner {
  readonly grant: TokenGrantInput;
  /** The token to send now, or undefined (placeholders then fail closed). */
  token(): Secret | undefined;
  status(): GrantStatus;
  start(): void;
  stop(): void;
}

export interface RunnerDeps {
  readonly client: TokenClientDeps;
  readonly timers: Timers;
  readonly logger: Logger;
  /** The token was obtained, replaced or dropped. */
  readonly changed: () => void;
  /** Every request's outcome, for the metrics. */
  readonly counted: (provider: string, key: string, outcome: 'ok' | TokenFailure) => void;
}

export function retryDelayMs(failures: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_INITIAL_MS * 2 ** Math.max(0, Math.min(failures - 1, 30)));
}

export function createGrantRunner(provider: string, grant: TokenGrantInput, deps: RunnerDeps): GrantRunner {
  const { timers } = deps;
  let token: { readonly value: Secret; readonly usableUntil: number } | undefined;
  // The server's rotated refresh token replaces the file's in memory only (docs/credentials.md#token-grants).
  let refreshToken = grant.refreshToken;
  let failures = 0;
  let lastFailure: TokenFailure | undefined;
  let inFlight = false;
  let stopped = false;
  let next: unknown;
  let expiry: unknown;

  function schedule(ms: number): void {
    if (next !== undefined) timers.clearTimeout(next);
    next = timers.setTimeout(() => {
      next = undefined;
      fetch();
    }, ms);
  }

  function dropToken(): void {
    expiry = undefined;
    if (token === undefined || stopped) return;
    token = undefined;
    deps.logger.warn({ provider, key: grant.key, failures, lastFailure }, 'token grant: the token expired without a successful refresh; its placeholders fail closed');
    deps.changed();
  }

  function succeeded(value: Secret, expiresInS: number, rotated: Secret | undefined): void {
    const lifetime = expiresInS * 1_000;
    const usable = lifetime - Math.min(TOKEN_EXPIRY_SKEW_MS, lifetime / 2);
    const at = timers.now();
    token = { value, usableUntil: at + usable };
    if (rotated !== undefined) refreshToken = rotated;
    if (failures > 0) deps.logger.info({ provider, key: grant.key, failures }, 'token grant: token obtained again');
    failures = 0;
    lastFailure = undefined;
    if (expiry !== undefined) timers.clearTimeout(expiry);
    expiry = timers.setTimeout(dropToken, usable);
    schedule(usable * REFRESH_AT_FRACTION);
    deps.changed();
  }

  function fetch(): void {
    if (inFlight || stopped) return;
    inFlight = true;
    void requestToken(grant, refreshToken, deps.client).then((outcome) => {
      inFlight = false;
      if (stopped) return;
      deps.counted(provider, grant.key, outcome.ok ? 'ok' : outcome.reason);
      if (outcome.ok) {
        succeeded(outcome.accessToken, outcome.expiresInS, outcome.refreshToken);
        return;
      }
      failures++;
      lastFailure = outcome.reason;
      const retryInMs = retryDelayMs(failures);
      deps.logger.warn({ provider, key: grant.key, reason: outcome.reason, detail: outcome.detail, failures, retryInMs }, 'token grant: token request failed');
      schedule(retryInMs);
    });
  }

  return {
    grant,
    token: () => token?.value,
    status() {
      const left = token === undefined ? 0 : Math.max(0, (token.usableUntil - timers.now()) / 1_000);
      const state: GrantState = token !== undefined ? (failures > 0 ? 'refresh-failing' : 'valid') : failures > 0 ? 'unavailable' : 'fetching';
      return { provider, key: grant.key, state, usableForSeconds: left, failures, lastFailure };
    },
    start: fetch,
    stop() {
      stopped = true;
      if (next !== undefined) timers.clearTimeout(next);
      if (expiry !== undefined) timers.clearTimeout(expiry);
      next = undefined;
      expiry = undefined;
    },
  };
}
