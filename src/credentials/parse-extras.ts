// The credentials YAML's client_certificate (docs/credentials.md#client-certificates) and a key's placeholder format
// (docs/credentials.md#shaped-placeholders), read on parse-walk.ts's walk. Pure: the files are read by file-source.ts.

import { isMap, isScalar, isSeq, type YAMLMap } from 'yaml';
import type { ClientCertificateFiles } from './client-cert.js';
import { asMap, asString, entries, type Located, locate, report, type Walk } from './parse-walk.js';
import { SHORTEST_MARKER_CHARS } from './placeholder.js';
import type { CredentialEndpointInput } from './set.js';
import { compileFormat, type CustomFormatInput, type PlaceholderFormat } from './shaped.js';

/** A provider's client_certificate files, read (and the key checked against the certificate) by file-source.ts. */
export interface ClientCertificateSpec extends ClientCertificateFiles {
  readonly at: Located;
}

export function readClientCertificate(walk: Walk, node: unknown, path: string): ClientCertificateSpec | undefined {
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
export function clientCertificateBinding(walk: Walk, map: YAMLMap, path: string, endpoints: readonly CredentialEndpointInput[]): void {
  const listed = map.get('endpoints', true);
  if (endpoints.length === 0) report(walk, 'CREDENTIALS_CLIENT_CERT_INVALID', map, `${path}.client_certificate`, "needs endpoints: it is presented only to its provider's own endpoints");
  endpoints.forEach((endpoint, index) => {
    if (endpoint.path === undefined) return;
    const node = isSeq(listed) ? listed.items[index] : map;
    report(walk, 'CREDENTIALS_CLIENT_CERT_INVALID', node, `${path}.endpoints[${index}].path`, 'cannot be set beside client_certificate: the certificate is presented at the TLS handshake, before any path');
  });
}

/** An env entry's `format` (a map entry beside value_from): undefined without one, null when it is refused (reported). */
export function readEntryFormat(walk: Walk, entry: unknown, path: string): PlaceholderFormat | null | undefined {
  if (!isMap(entry) || !entry.has('format')) return undefined;
  const node = entry.get('format', true);
  let input: string | CustomFormatInput | undefined;
  if (isScalar(node) && typeof node.value === 'string') input = node.value;
  else if (isMap(node)) {
    const fields: Record<string, unknown> = {};
    for (const [key, value] of entries(walk, node, `${path}.format`, ['prefix', 'length', 'alphabet'])) fields[key] = isScalar(value) ? value.value : undefined;
    const { prefix = '', length, alphabet } = fields;
    if (typeof prefix === 'string' && typeof length === 'number' && typeof alphabet === 'string') input = { prefix, length, alphabet };
  }
  if (input === undefined) {
    report(walk, 'CREDENTIALS_FORMAT_INVALID', node, `${path}.format`, 'expected a format name or { prefix: string, length: number, alphabet: name }');
    return null;
  }
  const compiled = compileFormat(input, SHORTEST_MARKER_CHARS);
  if (compiled.ok) return compiled.format;
  report(walk, 'CREDENTIALS_FORMAT_INVALID', node, `${path}.format`, compiled.message);
  return null;
}
