// Reads the credentials YAML into a validated document: providers, env entries (literal or value_from),
// endpoints. Every problem is an Issue with a YAML path and line:column; one throw lists them all.
// Pure: value_from references are described here and resolved by file-source.ts.

import { isAlias, isMap, isScalar, isSeq, LineCounter, type Node as YamlNode, parseDocument, type YAMLMap } from 'yaml';
import { BoundaryError, type ErrorCode, type Issue } from '../shared/errors.js';
import type { ClientCertificateFiles } from './client-cert.js';
import { compileHostPattern, compilePathGlob } from './endpoint-match.js';
import { keyNameProblem, SHORTEST_MARKER_CHARS } from './placeholder.js';
import { compileFormat, type CustomFormatInput, type PlaceholderFormat } from './shaped.js';
import { Secret } from './secret.js';
import {
  type CredentialEndpointInput,
  MAX_ENDPOINTS_PER_PROVIDER,
  MAX_KEYS_PER_PROVIDER,
  MAX_PROVIDERS,
  providerNameProblem,
  secretValueProblem,
} from './set.js';

export const MAX_CREDENTIALS_FILE_BYTES = 1_048_576;

type EnvValueSpec =
  | { readonly kind: 'literal'; readonly value: Secret }
  | { readonly kind: 'file'; readonly path: string }
  | { readonly kind: 'env'; readonly name: string };

interface Located {
  readonly path: string;
  readonly line?: number;
  readonly column?: number;
}

export interface EnvEntrySpec {
  readonly key: string;
  readonly value: EnvValueSpec;
  /** The shape of its placeholder (docs/credentials.md#shaped-placeholders); the placeholder forms otherwise. */
  readonly format?: PlaceholderFormat | undefined;
  /** Where the entry is, so a value_from problem found later still points at its line. */
  readonly at: Located;
}

/** A provider's client_certificate files, read (and the key checked against the certificate) by file-source.ts. */
export interface ClientCertificateSpec extends ClientCertificateFiles {
  readonly at: Located;
}

interface ProviderSpec {
  readonly name: string;
  readonly env: readonly EnvEntrySpec[];
  readonly endpoints: readonly CredentialEndpointInput[];
  readonly clientCertificate?: ClientCertificateSpec | undefined;
}

export interface CredentialsDocument {
  readonly providers: readonly ProviderSpec[];
}

interface Walk {
  readonly issues: Issue[];
  readonly lines: LineCounter;
  readonly source: string | undefined;
}

function locate(walk: Walk, node: unknown, path: string): Located {
  const range = (node as { range?: readonly number[] } | null)?.range;
  if (range === undefined || range[0] === undefined) return { path };
  const { line, col } = walk.lines.linePos(range[0]);
  return { path, line, column: col };
}

function report(walk: Walk, code: ErrorCode, node: unknown, path: string, message: string): void {
  const at = locate(walk, node, path);
  walk.issues.push({ code, message, ...at, ...(walk.source === undefined ? {} : { source: walk.source }) });
}

function asMap(walk: Walk, node: unknown, path: string): YAMLMap | undefined {
  if (isMap(node)) return node;
  report(walk, 'CREDENTIALS_TYPE', node, path, isAlias(node) ? 'YAML aliases are not supported' : 'expected a map');
  return undefined;
}

function asString(walk: Walk, node: unknown, path: string): string | undefined {
  if (isScalar(node) && typeof node.value === 'string') return node.value;
  report(walk, 'CREDENTIALS_TYPE', node, path, 'expected a string (quote numbers and booleans)');
  return undefined;
}

/** OpenShell provider-credential fields boundary does not implement. */
const UNSUPPORTED_PROVIDER_KEYS: ReadonlySet<string> = new Set(['token_grant', 'auth_style', 'header_name']);

/** Map entries with scalar string keys; other keys are reported. Unknown keys are reported when `allowed` is set. */
function entries(walk: Walk, map: YAMLMap, path: string, allowed?: readonly string[]): [string, unknown, unknown][] {
  const out: [string, unknown, unknown][] = [];
  for (const pair of map.items) {
    if (!isScalar(pair.key) || typeof pair.key.value !== 'string') {
      report(walk, 'CREDENTIALS_TYPE', pair.key, path, 'keys must be strings');
      continue;
    }
    const key = pair.key.value;
    if (allowed !== undefined && !allowed.includes(key)) {
      const where = path === '' ? key : `${path}.${key}`;
      // OpenShell's provider-profile token grants (OAuth client credentials with a SPIFFE JWT-SVID): refused by name,
      // never accepted and ignored (docs/credentials.md#sigv4-signing).
      const why = UNSUPPORTED_PROVIDER_KEYS.has(key) ? 'OpenShell token grants are not supported by boundary' : 'unknown key';
      report(walk, 'CREDENTIALS_UNKNOWN_KEY', pair.key, where, `${why} (expected ${allowed.join(', ')})`);
      continue;
    }
    out.push([key, pair.value, pair.key]);
  }
  return out;
}

function readEnvValue(walk: Walk, node: unknown, path: string): EnvValueSpec | undefined {
  if (isScalar(node) && typeof node.value === 'string') {
    const problem = secretValueProblem(node.value);
    if (problem === undefined) return { kind: 'literal', value: new Secret(node.value) };
    report(walk, 'CREDENTIALS_VALUE_INVALID', node, path, `value ${problem}`);
    return undefined;
  }
  if (!isMap(node)) {
    report(walk, 'CREDENTIALS_TYPE', node, path, 'expected a string (quote numbers) or { value_from: { file | env } }');
    return undefined;
  }
  const outer = entries(walk, node, path, ['value_from', 'format']).filter(([key]) => key === 'value_from');
  const fromNode = outer[0]?.[1];
  const fromMap = outer.length === 1 ? asMap(walk, fromNode, `${path}.value_from`) : undefined;
  const onlyFormat = node.items.every((pair) => isScalar(pair.key) && pair.key.value === 'format');
  if (outer.length === 0 && onlyFormat) report(walk, 'CREDENTIALS_TYPE', node, path, 'needs value_from');
  if (fromMap === undefined) return undefined;
  const sources = entries(walk, fromMap, `${path}.value_from`, ['file', 'env']);
  const [kind, valueNode] = sources[0] ?? ['', undefined];
  if (sources.length !== 1 || fromMap.items.length !== 1) {
    report(walk, 'CREDENTIALS_TYPE', fromMap, `${path}.value_from`, 'needs exactly one of file or env');
    return undefined;
  }
  const text = asString(walk, valueNode, `${path}.value_from.${kind}`);
  if (text === undefined) return undefined;
  if (text.length === 0 || /[\u0000\r\n]/.test(text)) {
    report(walk, 'CREDENTIALS_TYPE', valueNode, `${path}.value_from.${kind}`, 'must be non-empty, without CR, LF or NUL');
    return undefined;
  }
  return kind === 'file' ? { kind: 'file', path: text } : { kind: 'env', name: text };
}

/** A key's `format`: a catalogue name or { prefix, length, alphabet }. null when it is refused (reported). */
function readFormat(walk: Walk, node: unknown, path: string): PlaceholderFormat | null {
  let input: string | CustomFormatInput | undefined;
  if (isScalar(node) && typeof node.value === 'string') input = node.value;
  else if (isMap(node)) {
    const fields: Record<string, unknown> = {};
    for (const [key, value] of entries(walk, node, path, ['prefix', 'length', 'alphabet'])) fields[key] = isScalar(value) ? value.value : undefined;
    const { prefix = '', length, alphabet } = fields;
    if (typeof prefix === 'string' && typeof length === 'number' && typeof alphabet === 'string') input = { prefix, length, alphabet };
  }
  if (input === undefined) {
    report(walk, 'CREDENTIALS_FORMAT_INVALID', node, path, 'expected a format name or { prefix: string, length: number, alphabet: name }');
    return null;
  }
  const compiled = compileFormat(input, SHORTEST_MARKER_CHARS);
  if (compiled.ok) return compiled.format;
  report(walk, 'CREDENTIALS_FORMAT_INVALID', node, path, compiled.message);
  return null;
}

function readEndpoint(walk: Walk, node: unknown, path: string): CredentialEndpointInput | undefined {
  const map = asMap(walk, node, path);
  if (map === undefined) return undefined;
  let host: string | undefined;
  let port: number | undefined;
  let glob: string | undefined;
  for (const [key, value] of entries(walk, map, path, ['host', 'port', 'path'])) {
    if (key === 'port') {
      const n = isScalar(value) ? value.value : undefined;
      if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65_535) port = n;
      else report(walk, 'CREDENTIALS_ENDPOINT_INVALID', value, `${path}.port`, 'must be an integer 1-65535');
    } else {
      const text = asString(walk, value, `${path}.${key}`);
      if (text === undefined) continue;
      const compiled = key === 'host' ? compileHostPattern(text) : compilePathGlob(text);
      if (!compiled.ok) report(walk, 'CREDENTIALS_ENDPOINT_INVALID', value, `${path}.${key}`, compiled.message);
      else if (key === 'host') host = text;
      else glob = text;
    }
  }
  if (!map.has('host')) report(walk, 'CREDENTIALS_ENDPOINT_INVALID', map, `${path}.host`, 'required');
  if (!map.has('port')) report(walk, 'CREDENTIALS_ENDPOINT_INVALID', map, `${path}.port`, 'required');
  if (host === undefined || port === undefined) return undefined;
  return glob === undefined ? { host, port } : { host, port, path: glob };
}

function readClientCertificate(walk: Walk, node: unknown, path: string): ClientCertificateSpec | undefined {
  const map = asMap(walk, node, path);
  if (map === undefined) return undefined;
  const files: Record<string, string> = {};
  for (const [key, value] of entries(walk, map, path, ['cert', 'key', 'chain'])) {
    const text = asString(walk, value, `${path}.${key}`);
    if (text === undefined) continue;
    if (text.length === 0 || /[\u0000\r\n]/.test(text)) {
      report(walk, 'CREDENTIALS_CLIENT_CERT_INVALID', value, `${path}.${key}`, 'must be a file path, without CR, LF or NUL');
    } else files[key] = text;
  }
  for (const key of ['cert', 'key']) if (!map.has(key)) report(walk, 'CREDENTIALS_CLIENT_CERT_INVALID', map, `${path}.${key}`, 'required');
  const { cert, key, chain } = files;
  if (cert === undefined || key === undefined) return undefined;
  return { cert, key, ...(chain === undefined ? {} : { chain }), at: locate(walk, node, path) };
}

/**
 * A certificate is presented at the handshake, before any path is known, and only to its provider's own endpoints:
 * a path there would read as a narrower binding than the connection gets, and without endpoints it binds nowhere.
 */
function clientCertificateBinding(walk: Walk, map: YAMLMap, path: string, endpoints: readonly CredentialEndpointInput[]): void {
  const listed = map.get('endpoints', true);
  if (endpoints.length === 0) report(walk, 'CREDENTIALS_CLIENT_CERT_INVALID', map, `${path}.client_certificate`, 'needs endpoints: it is presented only to its provider\'s own endpoints');
  endpoints.forEach((endpoint, index) => {
    if (endpoint.path === undefined) return;
    const node = isSeq(listed) ? listed.items[index] : map;
    report(walk, 'CREDENTIALS_CLIENT_CERT_INVALID', node, `${path}.endpoints[${index}].path`, 'cannot be set beside client_certificate: the certificate is presented at the TLS handshake, before any path');
  });
}

function readProvider(walk: Walk, name: string, node: unknown, keyNode: unknown): ProviderSpec | undefined {
  const path = `providers.${name}`;
  const nameProblem = providerNameProblem(name);
  if (nameProblem !== undefined) report(walk, 'CREDENTIALS_PROVIDER_INVALID', keyNode, path, nameProblem);
  const map = asMap(walk, node, path);
  if (map === undefined) return undefined;
  const env: EnvEntrySpec[] = [];
  const endpoints: CredentialEndpointInput[] = [];
  let clientCertificate: ClientCertificateSpec | undefined;
  for (const [field, value] of entries(walk, map, path, ['env', 'endpoints', 'client_certificate'])) {
    if (field === 'client_certificate') {
      clientCertificate = readClientCertificate(walk, value, `${path}.client_certificate`);
    } else if (field === 'env') {
      const envMap = asMap(walk, value, `${path}.env`);
      const items = envMap === undefined ? [] : entries(walk, envMap, `${path}.env`);
      if (items.length > MAX_KEYS_PER_PROVIDER) report(walk, 'CREDENTIALS_LIMIT', value, `${path}.env`, 'too many keys');
      for (const [key, entry, entryKey] of items.slice(0, MAX_KEYS_PER_PROVIDER)) {
        const at = locate(walk, entryKey, `${path}.env.${key}`);
        const keyProblem = keyNameProblem(key);
        if (keyProblem !== undefined) report(walk, 'CREDENTIALS_KEY_INVALID', entryKey, at.path, keyProblem);
        const spec = readEnvValue(walk, entry, at.path);
        const format = isMap(entry) && entry.has('format') ? readFormat(walk, entry.get('format', true), `${at.path}.format`) : undefined;
        if (keyProblem === undefined && spec !== undefined && format !== null) env.push({ key, value: spec, at, ...(format === undefined ? {} : { format }) });
      }
    } else if (isSeq(value)) {
      if (value.items.length > MAX_ENDPOINTS_PER_PROVIDER) {
        report(walk, 'CREDENTIALS_LIMIT', value, `${path}.endpoints`, 'too many endpoints');
      }
      value.items.slice(0, MAX_ENDPOINTS_PER_PROVIDER).forEach((item, index) => {
        const endpoint = readEndpoint(walk, item, `${path}.endpoints[${index}]`);
        if (endpoint !== undefined) endpoints.push(endpoint);
      });
    } else {
      report(walk, 'CREDENTIALS_TYPE', value, `${path}.endpoints`, 'expected a list');
    }
  }
  if (clientCertificate !== undefined) clientCertificateBinding(walk, map, path, endpoints);
  return { name, env, endpoints, ...(clientCertificate === undefined ? {} : { clientCertificate }) };
}

/** Parses and validates the credentials YAML. Throws BoundaryError CREDENTIALS_INVALID listing every issue. */
export function parseCredentials(text: string, options: { readonly source?: string } = {}): CredentialsDocument {
  const walk: Walk = { issues: [], lines: new LineCounter(), source: options.source };
  if (Buffer.byteLength(text) > MAX_CREDENTIALS_FILE_BYTES) {
    report(walk, 'CREDENTIALS_LIMIT', null, '', `file is larger than ${MAX_CREDENTIALS_FILE_BYTES} bytes`);
    throw new BoundaryError('CREDENTIALS_INVALID', 'credentials file is too large', { issues: walk.issues });
  }
  const doc = parseDocument(text, { lineCounter: walk.lines, uniqueKeys: true, prettyErrors: false });
  for (const error of doc.errors) {
    const pos = walk.lines.linePos(error.pos[0]);
    const message = error.message.split('\n')[0] ?? error.message;
    walk.issues.push({
      code: 'CREDENTIALS_YAML_SYNTAX',
      path: '',
      message,
      line: pos.line,
      column: pos.col,
      ...(options.source === undefined ? {} : { source: options.source }),
    });
  }
  const providers: ProviderSpec[] = [];
  const root = doc.errors.length > 0 ? undefined : asMap(walk, doc.contents as YamlNode | null, '(root)');
  for (const [key, value] of root === undefined ? [] : entries(walk, root, '', ['providers'])) {
    const map = asMap(walk, value, key);
    const items = map === undefined ? [] : entries(walk, map, key);
    if (items.length > MAX_PROVIDERS) report(walk, 'CREDENTIALS_LIMIT', value, key, 'too many providers');
    for (const [name, node, keyNode] of items.slice(0, MAX_PROVIDERS)) {
      const provider = readProvider(walk, name, node, keyNode);
      if (provider !== undefined) providers.push(provider);
    }
  }
  if (root !== undefined && !root.has('providers')) report(walk, 'CREDENTIALS_TYPE', root, 'providers', 'required');
  if (walk.issues.length > 0) {
    const first = walk.issues[0];
    const where = first?.line === undefined ? first?.path : `${first.path} (line ${first.line}:${first.column})`;
    throw new BoundaryError('CREDENTIALS_INVALID', `credentials: ${walk.issues.length} problem(s), first at ${where}`, {
      issues: walk.issues,
    });
  }
  return { providers };
}
