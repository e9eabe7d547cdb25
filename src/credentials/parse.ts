// Reads the credentials YAML into a validated document: providers, env entries (literal or value_from),
// endpoints. Every problem is an Issue with a YAML path and line:column; one throw lists them all.
// Pure: value_from references are described here and resolved by file-source.ts.

import { isScalar, isSeq, LineCounter, type Node as YamlNode, parseDocument } from 'yaml';
import { BoundaryError } from '../shared/errors.js';
import { compileHostPattern, compilePathGlob } from './endpoint-match.js';
import { type GrantSpec, readGrants } from './parse-grant.js';
import { asMap, asString, type EnvEntrySpec, entries, locate, readEnvValue, report, type Walk } from './parse-walk.js';
import { type ClientCertificateSpec, clientCertificateBinding, readClientCertificate, readEntryFormat } from './parse-extras.js';
import { keyNameProblem } from './placeholder.js';
import { type CredentialEndpointInput, MAX_ENDPOINTS_PER_PROVIDER, MAX_KEYS_PER_PROVIDER, MAX_PROVIDERS, providerNameProblem } from './set.js';

export type { EnvEntrySpec } from './parse-walk.js';
export type { ClientCertificateSpec } from './parse-extras.js';

export const MAX_CREDENTIALS_FILE_BYTES = 1_048_576;

interface ProviderSpec {
  readonly name: string;
  readonly env: readonly EnvEntrySpec[];
  readonly endpoints: readonly CredentialEndpointInput[];
  /** Token grants (docs/credentials.md#token-grants), their secrets still value_from references. */
  readonly grants: readonly GrantSpec[];
  readonly clientCertificate?: ClientCertificateSpec | undefined;
}

export interface CredentialsDocument {
  readonly providers: readonly ProviderSpec[];
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

function readProvider(walk: Walk, name: string, node: unknown, keyNode: unknown): ProviderSpec | undefined {
  const path = `providers.${name}`;
  const nameProblem = providerNameProblem(name);
  if (nameProblem !== undefined) report(walk, 'CREDENTIALS_PROVIDER_INVALID', keyNode, path, nameProblem);
  const map = asMap(walk, node, path);
  if (map === undefined) return undefined;
  const env: EnvEntrySpec[] = [];
  const endpoints: CredentialEndpointInput[] = [];
  let grants: readonly GrantSpec[] = [];
  let grantsNode: unknown;
  let clientCertificate: ClientCertificateSpec | undefined;
  for (const [field, value] of entries(walk, map, path, ['env', 'endpoints', 'token_grants', 'client_certificate'])) {
    if (field === 'client_certificate') {
      clientCertificate = readClientCertificate(walk, value, `${path}.client_certificate`);
    } else if (field === 'token_grants') {
      grants = readGrants(walk, value, `${path}.token_grants`);
      grantsNode = value;
    } else if (field === 'env') {
      const envMap = asMap(walk, value, `${path}.env`);
      const items = envMap === undefined ? [] : entries(walk, envMap, `${path}.env`);
      if (items.length > MAX_KEYS_PER_PROVIDER) report(walk, 'CREDENTIALS_LIMIT', value, `${path}.env`, 'too many keys');
      for (const [key, entry, entryKey] of items.slice(0, MAX_KEYS_PER_PROVIDER)) {
        const at = locate(walk, entryKey, `${path}.env.${key}`);
        const keyProblem = keyNameProblem(key);
        if (keyProblem !== undefined) report(walk, 'CREDENTIALS_KEY_INVALID', entryKey, at.path, keyProblem);
        const spec = readEnvValue(walk, entry, at.path, ['format']);
        const format = readEntryFormat(walk, entry, at.path);
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
  // One key, one value: a grant's token and a static entry under the same name would make the placeholder ambiguous.
  for (const grant of grants) {
    if (env.some((entry) => entry.key === grant.key)) {
      report(walk, 'CREDENTIALS_KEY_INVALID', grantsNode, grant.at.path, 'is also an env key of this provider');
    }
  }
  if (clientCertificate !== undefined) clientCertificateBinding(walk, map, path, endpoints);
  return { name, env, endpoints, grants, ...(clientCertificate === undefined ? {} : { clientCertificate }) };
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
