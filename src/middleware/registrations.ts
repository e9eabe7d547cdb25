// The external middleware services an operator registers (docs/running.md#middleware-services): operator
// configuration from `--middleware-config FILE`, never policy. Validated into frozen registrations, or CONFIG_INVALID
// listing every problem. Only loadRegistrationsFile reads files.

import { readFile } from 'node:fs/promises';
import { isReservedMiddlewareName } from '../policy/middleware-builtins.js';
import { BoundaryError, type Issue } from '../shared/errors.js';

/** Largest body a service is sent (and may send back), whatever it advertises. */
export const MAX_MIDDLEWARE_PAYLOAD_BYTES = 4 * 1024 * 1024;
/** A call's timeout: at least this... */
export const MIN_MIDDLEWARE_TIMEOUT_MS = 10;
/** ...at most this... */
export const MAX_MIDDLEWARE_TIMEOUT_MS = 30_000;
/** ...and this when the registration names none. */
export const DEFAULT_MIDDLEWARE_TIMEOUT_MS = 500;
/** Services one boundary may have registered. */
export const MAX_MIDDLEWARE_SERVICES = 64;
/** The registrations file, and each CA file it names. */
const MAX_REGISTRATION_FILE_BYTES = 1_048_576;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/;
const TIMEOUT = /^([1-9][0-9]{0,5})(ms|s)$/;
const KEYS = ['name', 'grpc_endpoint', 'max_payload_bytes', 'timeout', 'tls_ca_cert_path', 'allow_insecure_transport'] as const;

export interface MiddlewareRegistration {
  /** What a policy's `middleware:` names. */
  readonly name: string;
  /** `https://host:port` (or `http://` with allow_insecure_transport), as written. */
  readonly endpoint: string;
  /** `host:port` as the gRPC client dials it. */
  readonly target: string;
  readonly tls: boolean;
  readonly maxPayloadBytes: number;
  readonly timeoutMs: number;
  /** Trust anchors for the service's certificate instead of the system roots. */
  readonly caPem: string | undefined;
}

type Raw = Record<string, unknown>;

const isRecord = (value: unknown): value is Raw => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Validates the file's `services:` list (CA files already read into `caPem`); `where` names the file in messages. */
export function parseRegistrations(raw: unknown, where: string, cas: ReadonlyMap<number, string> = new Map()): readonly MiddlewareRegistration[] {
  const issues: Issue[] = [];
  const fail = (path: string, message: string): undefined => {
    issues.push({ code: 'CONFIG_INVALID', path, message });
    return undefined;
  };
  const list = Array.isArray(raw) ? raw : fail('services', 'expected a list of middleware services');
  if (list !== undefined && list.length > MAX_MIDDLEWARE_SERVICES) fail('services', `more than MAX_MIDDLEWARE_SERVICES (${MAX_MIDDLEWARE_SERVICES}) services`);
  const out: MiddlewareRegistration[] = [];
  const names = new Set<string>();
  for (const [i, item] of (list ?? []).entries()) {
    const path = `services[${i}]`;
    const registration = readRegistration(item, path, cas.get(i), fail);
    if (registration === undefined) continue;
    if (names.has(registration.name)) fail(`${path}.name`, `${registration.name} is registered twice`);
    names.add(registration.name);
    out.push(Object.freeze(registration));
  }
  if (issues.length > 0) {
    throw new BoundaryError('CONFIG_INVALID', `middleware services in ${where} are invalid: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
  }
  return Object.freeze(out);
}

function readRegistration(item: unknown, path: string, caPem: string | undefined, fail: (path: string, message: string) => undefined): MiddlewareRegistration | undefined {
  if (!isRecord(item)) return fail(path, 'expected a map');
  let ok = true;
  const bad = (key: string, message: string): undefined => {
    ok = false;
    return fail(`${path}.${key}`, message);
  };
  for (const key of Object.keys(item)) if (!(KEYS as readonly string[]).includes(key)) bad(key, 'unknown key');
  const name = typeof item.name === 'string' && NAME.test(item.name) ? item.name : bad('name', 'expected 1-128 characters of [A-Za-z0-9._/-], starting with a letter or digit');
  if (name !== undefined && isReservedMiddlewareName(name)) bad('name', 'the openshell/, ryno/ and boundary/ prefixes are reserved for built-ins');
  const insecure = item.allow_insecure_transport ?? false;
  if (typeof insecure !== 'boolean') bad('allow_insecure_transport', 'expected true or false');
  const endpoint = readEndpoint(item.grpc_endpoint, insecure === true, (message) => bad('grpc_endpoint', message));
  const max = item.max_payload_bytes;
  if (typeof max !== 'number' || !Number.isSafeInteger(max) || max < 1 || max > MAX_MIDDLEWARE_PAYLOAD_BYTES) {
    bad('max_payload_bytes', `required: an integer 1-${MAX_MIDDLEWARE_PAYLOAD_BYTES} (MAX_MIDDLEWARE_PAYLOAD_BYTES)`);
  }
  const timeoutMs = readTimeout(item.timeout, (message) => bad('timeout', message));
  if (caPem !== undefined && !caPem.includes('-----BEGIN CERTIFICATE-----')) bad('tls_ca_cert_path', 'expected a PEM file of certificates');
  if (caPem !== undefined && endpoint !== undefined && !endpoint.tls) bad('tls_ca_cert_path', 'a CA is for https:// endpoints');
  if (!ok || name === undefined || endpoint === undefined || timeoutMs === undefined) return undefined;
  return { name, endpoint: endpoint.url, target: endpoint.target, tls: endpoint.tls, maxPayloadBytes: max as number, timeoutMs, caPem };
}

function readEndpoint(raw: unknown, insecure: boolean, bad: (message: string) => undefined): { url: string; target: string; tls: boolean } | undefined {
  if (typeof raw !== 'string') return bad('required: https://HOST:PORT');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return bad('expected https://HOST:PORT');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return bad('expected https://HOST:PORT');
  if (url.protocol === 'http:' && !insecure) return bad('http:// carries bodies in cleartext; use https:// or set allow_insecure_transport: true');
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '' || (url.pathname !== '/' && url.pathname !== '')) {
    return bad('expected scheme, host and port only');
  }
  const tls = url.protocol === 'https:';
  return { url: raw, target: `${url.hostname}:${url.port === '' ? (tls ? 443 : 80) : url.port}`, tls };
}

function readTimeout(raw: unknown, bad: (message: string) => undefined): number | undefined {
  if (raw === undefined) return DEFAULT_MIDDLEWARE_TIMEOUT_MS;
  const match = typeof raw === 'string' ? TIMEOUT.exec(raw) : null;
  const ms = match === null ? undefined : Number(match[1]) * (match[2] === 's' ? 1000 : 1);
  if (ms === undefined || ms < MIN_MIDDLEWARE_TIMEOUT_MS || ms > MAX_MIDDLEWARE_TIMEOUT_MS) {
    return bad(`expected an integer with ms or s, ${MIN_MIDDLEWARE_TIMEOUT_MS}ms to ${MAX_MIDDLEWARE_TIMEOUT_MS / 1000}s`);
  }
  return ms;
}

/** Reads `--middleware-config FILE`: YAML `services: [...]`, each tls_ca_cert_path read. */
export async function loadRegistrationsFile(path: string): Promise<readonly MiddlewareRegistration[]> {
  const text = await readBounded(path, 'middleware config');
  // Loaded here, not at start: the yaml package is idle heap in every sidecar without a middleware config.
  const { parse } = await import('yaml');
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new BoundaryError('CONFIG_INVALID', `middleware config ${path} is not valid YAML`, { cause: err });
  }
  if (!isRecord(doc) || Object.keys(doc).some((k) => k !== 'services')) {
    throw new BoundaryError('CONFIG_INVALID', `middleware config ${path} must be a map with one key, services`);
  }
  const cas = new Map<number, string>();
  if (Array.isArray(doc.services)) {
    for (const [i, item] of doc.services.entries()) {
      if (isRecord(item) && typeof item.tls_ca_cert_path === 'string') cas.set(i, await readBounded(item.tls_ca_cert_path, 'middleware service CA'));
    }
  }
  return parseRegistrations(doc.services, path, cas);
}

async function readBounded(path: string, what: string): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw new BoundaryError('CONFIG_INVALID', `cannot read ${what} ${path}`, { cause: err });
  }
  if (bytes.length > MAX_REGISTRATION_FILE_BYTES) throw new BoundaryError('CONFIG_INVALID', `${what} ${path} is larger than ${MAX_REGISTRATION_FILE_BYTES} bytes`);
  return bytes.toString('utf8');
}
