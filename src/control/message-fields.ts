// The field readers behind control-message validation (messages.ts readMessage) and the per-field limits
// they enforce. Knows no message kinds: messages.ts's READERS table says which fields each kind has.

import type { Issue } from '../shared/errors.js';
import type { ControlSettings, FailureMode, RelayTarget, StatusError, WireGrantPlacement, WireMiddlewareService, WireProvider, WireTokenGrant } from './messages.js';

const MAX_ID_LENGTH = 128;
const MAX_TEXT_LENGTH = 4_096;
const MAX_EVENTS_PER_BATCH = 512;
const MAX_CREDENTIAL_PROVIDERS = 256;
const MAX_CREDENTIAL_KEYS = 1_024;
const MAX_CREDENTIAL_ENDPOINTS = 256;
/** Token grants per provider on the wire; credentials/grant.ts's own, smaller limit is checked when they are applied. */
const MAX_WIRE_TOKEN_GRANTS = 64;
/** Middleware services on the wire; middleware/registrations.ts's own limit is checked when they are applied. */
const MAX_WIRE_MIDDLEWARE_SERVICES = 256;
const MIDDLEWARE_SERVICE_KEYS = ['name', 'grpcEndpoint', 'maxPayloadBytes', 'timeoutMs', 'allowInsecureTransport', 'caPem'];

export type Fields = Record<string, unknown>;
export type Reader = ReturnType<typeof reader>;

/** What the readers take from the protocol itself, passed in so this file never imports messages.ts's values. */
interface ReaderProtocol {
  readonly maxBodyChars: number;
  readonly failureModes: readonly FailureMode[];
}

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
const HASH_PATTERN = /^[A-Za-z0-9:+/=_-]{1,128}$/;

// Each reader records a problem and returns a placeholder, so one pass reports every issue.
export function reader(issues: Issue[], protocol: ReaderProtocol) {
  const fail = (path: string, message: string): undefined => {
    issues.push(issue(path, message));
    return undefined;
  };
  const r = {
    optional<T>(raw: Fields, key: string, read: (raw: Fields, key: string) => T): T | undefined {
      return raw[key] === undefined ? undefined : read(raw, key);
    },
    text(raw: Fields, key: string, max = MAX_TEXT_LENGTH): string {
      const value = raw[key];
      if (typeof value !== 'string') return fail(key, 'expected a string') ?? '';
      if (value.length > max) return fail(key, `longer than ${max} characters`) ?? '';
      return value;
    },
    body(raw: Fields, key: string): string {
      return r.text(raw, key, protocol.maxBodyChars);
    },
    id(raw: Fields, key: string): string {
      const value = r.text(raw, key, MAX_ID_LENGTH);
      if (typeof raw[key] === 'string' && !ID_PATTERN.test(value)) fail(key, 'expected an id of [A-Za-z0-9._:-]');
      return value;
    },
    hash(raw: Fields, key: string): string {
      const value = raw[key];
      if (typeof value !== 'string' || !HASH_PATTERN.test(value)) return fail(key, 'expected a hash string') ?? '';
      return value;
    },
    generation(raw: Fields, key: string): number {
      const value = raw[key];
      if (!Number.isSafeInteger(value) || (value as number) < 0) return fail(key, 'expected an integer >= 0') ?? 0;
      return value as number;
    },
    count(raw: Fields, key: string): number {
      return r.generation(raw, key);
    },
    bool(raw: Fields, key: string): boolean {
      const value = raw[key];
      if (typeof value !== 'boolean') return fail(key, 'expected true or false') ?? false;
      return value;
    },
    oneOf<T extends string>(raw: Fields, key: string, set: readonly T[]): T {
      const value = raw[key];
      if (typeof value !== 'string' || !(set as readonly string[]).includes(value)) {
        return fail(key, `expected one of ${set.join(', ')}`) ?? (set[0] as T);
      }
      return value as T;
    },
    record(raw: Fields, key: string): Fields {
      const value = raw[key];
      if (!isRecord(value)) return fail(key, 'expected an object') ?? {};
      return value;
    },
    settings(raw: Fields, key: string): ControlSettings {
      const value = r.record(raw, key);
      const failureMode = r.oneOf(prefixed(value, key), `${key}.failureMode`, protocol.failureModes);
      for (const extra of Object.keys(value)) if (extra !== 'failureMode') fail(`${key}.${extra}`, 'unknown key');
      return { failureMode };
    },
    target(raw: Fields, key: string): RelayTarget {
      const value = prefixed(r.record(raw, key), key);
      const host = r.text(value, `${key}.host`, 255);
      const port = value[`${key}.port`];
      if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65_535) {
        fail(`${key}.port`, 'expected a port 1-65535');
      }
      return { host, port: port as number };
    },
    statusError(raw: Fields, key: string): StatusError {
      const value = prefixed(r.record(raw, key), key);
      const code = r.optional(value, `${key}.code`, (v, k) => r.text(v, k, MAX_ID_LENGTH));
      return compact({ kind: r.text(value, `${key}.kind`, MAX_ID_LENGTH), code, message: r.text(value, `${key}.message`) }) as unknown as StatusError;
    },
    credentials(raw: Fields, key: string): WireProvider[] {
      const value = raw[key];
      if (!Array.isArray(value)) return fail(key, 'expected a list of providers') ?? [];
      if (value.length > MAX_CREDENTIAL_PROVIDERS) fail(key, `more than ${MAX_CREDENTIAL_PROVIDERS} providers`);
      return value.map((item, index) => r.providerWithGrants(item, `${key}[${index}]`));
    },
    provider(item: unknown, path: string): WireProvider {
      if (!isRecord(item)) return fail(path, 'expected an object') ?? { name: '', env: {} };
      const name = typeof item.name === 'string' ? item.name : (fail(`${path}.name`, 'expected a string') ?? '');
      const env: Record<string, string> = {};
      if (!isRecord(item.env)) fail(`${path}.env`, 'expected an object of KEY: value');
      else {
        const keys = Object.keys(item.env);
        if (keys.length > MAX_CREDENTIAL_KEYS) fail(`${path}.env`, `more than ${MAX_CREDENTIAL_KEYS} keys`);
        // Never echo a value in an issue: it is a secret. Names and values are validated in depth by credentials/set.ts.
        for (const k of keys) {
          if (typeof item.env[k] === 'string') env[k] = item.env[k] as string;
          else fail(`${path}.env.${k}`, 'expected a string value');
        }
      }
      for (const extra of Object.keys(item)) if (!['name', 'env', 'endpoints', 'clientCertificatePem', 'formatIds'].includes(extra)) fail(`${path}.${extra}`, 'unknown key');
      const extras = r.providerExtras(item, path);
      if (item.endpoints === undefined) return { name, env, ...extras };
      if (!Array.isArray(item.endpoints) || item.endpoints.length > MAX_CREDENTIAL_ENDPOINTS) {
        return fail(`${path}.endpoints`, `expected a list of at most ${MAX_CREDENTIAL_ENDPOINTS} endpoints`) ?? { name, env, ...extras };
      }
      const endpoints = item.endpoints.map((e: unknown, i: number) => {
        const at = `${path}.endpoints[${i}]`;
        if (!isRecord(e) || typeof e.host !== 'string' || !Number.isInteger(e.port)) {
          return fail(at, 'expected {host, port, path?}') ?? { host: '', port: 0 };
        }
        if (e.path !== undefined && typeof e.path !== 'string') fail(`${at}.path`, 'expected a string');
        return e.path === undefined ? { host: e.host, port: e.port as number } : { host: e.host, port: e.port as number, path: e.path as string };
      });
      return { name, env, endpoints, ...extras };
    },
    /** A provider's client certificate and placeholder formats: shapes only here, credentials/delivered.ts checks the rest. */
    providerExtras(item: Record<string, unknown>, path: string): Pick<WireProvider, 'clientCertificatePem' | 'formatIds'> {
      const out: { clientCertificatePem?: { certChain: string; key: string }; formatIds?: Record<string, string> } = {};
      const pem = item.clientCertificatePem;
      if (pem !== undefined) {
        if (isRecord(pem) && typeof pem.certChain === 'string' && typeof pem.key === 'string') out.clientCertificatePem = { certChain: pem.certChain, key: pem.key };
        else fail(`${path}.clientCertificatePem`, 'expected {certChain, key} strings');
      }
      const ids = item.formatIds;
      if (ids !== undefined) {
        if (isRecord(ids) && Object.values(ids).every((v) => typeof v === 'string') && Object.keys(ids).length <= MAX_CREDENTIAL_KEYS) out.formatIds = ids as Record<string, string>;
        else fail(`${path}.formatIds`, `expected at most ${MAX_CREDENTIAL_KEYS} KEY: format id strings`);
      }
      return out;
    },
    events(raw: Fields, key: string): Fields[] {
      const value = raw[key];
      if (!Array.isArray(value)) return fail(key, 'expected an array') ?? [];
      if (value.length > MAX_EVENTS_PER_BATCH) fail(key, `more than ${MAX_EVENTS_PER_BATCH} events`);
      value.forEach((event, index) => {
        if (!isRecord(event)) fail(`${key}[${index}]`, 'expected an object');
      });
      return value as Fields[];
    },
    /**
     * A provider with its token grants (docs/credentials.md#token-grants) read here, the rest by provider(): shapes
     * only, never a value in an issue; what the fields may hold is checked by control/wire-credentials.ts.
     */
    providerWithGrants(item: unknown, path: string): WireProvider {
      if (!isRecord(item) || item.tokenGrants === undefined) return r.provider(item, path);
      const { tokenGrants, ...rest } = item;
      return { ...r.provider(rest, path), tokenGrants: r.tokenGrants(tokenGrants, `${path}.tokenGrants`) };
    },
    tokenGrants(value: unknown, path: string): WireTokenGrant[] {
      if (!Array.isArray(value) || value.length > MAX_WIRE_TOKEN_GRANTS) {
        return fail(path, `expected a list of at most ${MAX_WIRE_TOKEN_GRANTS} token grants`) ?? [];
      }
      return value.map((item: unknown, index: number) => r.tokenGrant(item, `${path}[${index}]`));
    },
    tokenGrant(item: unknown, path: string): WireTokenGrant {
      const empty = { key: '', grantType: '', tokenEndpoint: '', clientId: '', clientAuth: '', privateTokenEndpoint: false };
      if (!isRecord(item)) return fail(path, 'expected an object') ?? empty;
      const raw = prefixed(item, path);
      const string = (key: string) => r.text(raw, `${path}.${key}`, protocol.maxBodyChars);
      const secret = (key: string) => (typeof item[key] === 'string' ? (item[key] as string) : (fail(`${path}.${key}`, 'expected a string') ?? ''));
      const grant = compact({
        key: string('key'),
        grantType: string('grantType'),
        tokenEndpoint: string('tokenEndpoint'),
        clientId: string('clientId'),
        clientSecret: item.clientSecret === undefined ? undefined : secret('clientSecret'),
        clientAuth: string('clientAuth'),
        refreshToken: item.refreshToken === undefined ? undefined : secret('refreshToken'),
        scope: r.optional(raw, `${path}.scope`, (v, k) => r.text(v, k, protocol.maxBodyChars)),
        audience: r.optional(raw, `${path}.audience`, (v, k) => r.text(v, k, protocol.maxBodyChars)),
        resource: r.optional(raw, `${path}.resource`, (v, k) => r.text(v, k, protocol.maxBodyChars)),
        placement: item.placement === undefined ? undefined : r.placement(item.placement, `${path}.placement`),
        privateTokenEndpoint: r.bool(raw, `${path}.privateTokenEndpoint`),
      });
      for (const extra of Object.keys(item)) if (!(extra in grant)) fail(`${path}.${extra}`, 'unknown key');
      return grant as unknown as WireTokenGrant;
    },
    /** Shapes only: control/wire-middleware.ts checks the values with the rules of --middleware-config. */
    middlewareServices(raw: Fields, key: string): WireMiddlewareService[] {
      const value = raw[key];
      if (!Array.isArray(value) || value.length > MAX_WIRE_MIDDLEWARE_SERVICES) {
        return fail(key, `expected a list of at most ${MAX_WIRE_MIDDLEWARE_SERVICES} middleware services`) ?? [];
      }
      return value.map((item: unknown, index: number) => {
        const path = `${key}[${index}]`;
        if (!isRecord(item)) return fail(path, 'expected an object') ?? { name: '', grpcEndpoint: '', maxPayloadBytes: 0, timeoutMs: 0 };
        const at = prefixed(item, path);
        const service = compact({
          name: r.text(at, `${path}.name`, MAX_ID_LENGTH),
          grpcEndpoint: r.text(at, `${path}.grpcEndpoint`),
          maxPayloadBytes: r.count(at, `${path}.maxPayloadBytes`),
          timeoutMs: r.count(at, `${path}.timeoutMs`),
          allowInsecureTransport: r.optional(at, `${path}.allowInsecureTransport`, r.bool),
          caPem: r.optional(at, `${path}.caPem`, r.body),
        });
        for (const extra of Object.keys(item)) if (!MIDDLEWARE_SERVICE_KEYS.includes(extra)) fail(`${path}.${extra}`, 'unknown key');
        return service as unknown as WireMiddlewareService;
      });
    },
    placement(value: unknown, path: string): WireGrantPlacement {
      if (isRecord(value) && value.kind === 'bearer' && Object.keys(value).length === 1) return { kind: 'bearer' };
      if (isRecord(value) && value.kind === 'header' && typeof value.name === 'string' && Object.keys(value).length === 2) {
        return { kind: 'header', name: value.name };
      }
      return fail(path, "expected { kind: 'bearer' } or { kind: 'header', name }") ?? { kind: 'bearer' };
    },
  };
  return r;
}

export function prefixed(value: Fields, key: string): Fields {
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [`${key}.${k}`, v]));
}

export function compact(fields: Fields): Fields {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

export function isRecord(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function issue(path: string, message: string): Issue {
  return { code: 'CONTROL_MESSAGE_INVALID', path, message };
}
