// The field readers of the run configuration (config.ts): listen addresses, strings, one-of choices and positive
// integers, each adding a CONFIG_INVALID issue instead of throwing, so parseConfig can list every problem at once.

import { isIP } from 'node:net';
import type { Issue } from '../shared/errors.js';
import type { ListenAddress } from './config.js';

/**
 * The longest delay a Node timer holds (2^31-1 ms, about 24.8 days). A longer one fires after 1 ms instead, so a
 * generous deadline or timeout (`--shutdown-drain-ms`, `--close-grace-ms`, any `...Ms` limit) would act at once.
 */
export const MAX_TIMER_MS = 2_147_483_647;

const PORT_TEXT = /^(0|[1-9][0-9]{0,4})$/;

export function issue(issues: Issue[], path: string, message: string): void {
  issues.push({ code: 'CONFIG_INVALID', path, message });
}

/** `host:port` (IPv6 bracketed) or `{ host, port }`; the host must be an IP literal or `localhost`; port 0 is allowed. */
export function parseListenAddress(raw: unknown, path: string, issues: Issue[]): ListenAddress | undefined {
  let host: unknown;
  let port: unknown;
  if (typeof raw === 'string') {
    const bracket = raw.startsWith('[');
    const colon = bracket ? raw.indexOf(']:') + 1 : raw.lastIndexOf(':');
    if (colon <= 0) {
      issue(issues, path, `expected host:port, got ${JSON.stringify(raw)}`);
      return undefined;
    }
    host = bracket ? raw.slice(1, colon - 1) : raw.slice(0, colon);
    const portText = raw.slice(colon + 1);
    port = PORT_TEXT.test(portText) ? Number(portText) : Number.NaN;
  } else if (typeof raw === 'object' && raw !== null) {
    ({ host, port } = raw as { host?: unknown; port?: unknown });
  } else {
    issue(issues, path, 'expected host:port');
    return undefined;
  }
  let ok = true;
  if (typeof host !== 'string' || (isIP(host) === 0 && host !== 'localhost')) {
    issue(issues, `${path}.host`, 'expected an IP literal or localhost');
    ok = false;
  }
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    issue(issues, `${path}.port`, 'expected an integer 0-65535');
    ok = false;
  }
  return ok ? Object.freeze({ host: host as string, port: port as number }) : undefined;
}

export function optionalString(raw: unknown, path: string, issues: Issue[]): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || raw.length === 0) {
    issue(issues, path, 'expected a non-empty string');
    return undefined;
  }
  return raw;
}

export function oneOf<T extends string>(raw: unknown, allowed: readonly T[], fallback: T, path: string, issues: Issue[]): T {
  if (raw === undefined) return fallback;
  if (typeof raw === 'string' && (allowed as readonly string[]).includes(raw)) return raw as T;
  issue(issues, path, `expected one of ${allowed.join(', ')}`);
  return fallback;
}

/** A positive integer, and for milliseconds (`ms`) one a timer can hold; undefined after an issue otherwise. */
export function positiveInteger(raw: unknown, path: string, issues: Issue[], ms: boolean): number | undefined {
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 1) issue(issues, path, 'expected a positive integer');
  else if (ms && raw > MAX_TIMER_MS) issue(issues, path, `expected at most ${MAX_TIMER_MS} ms (MAX_TIMER_MS)`);
  else return raw;
  return undefined;
}
