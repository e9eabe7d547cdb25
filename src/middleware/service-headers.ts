// The head as an external middleware service sees it, and the header changes it may make: credential, routing,
// framing and hop-by-hop fields are neither shown nor writable, nor is anything policy reads again (content type,
// method overrides); a line carrying a credential placeholder is never shown. Pure; values are never logged.

import { containsMarker } from '../credentials/placeholder.js';
import { withoutHeader } from './headers.js';
import type { HeaderMutation } from './implementation.js';

/** Header lines shown to a service; later ones are left out. */
export const MAX_SERVICE_HEADER_LINES = 128;
/** Name and value bytes shown to a service; later lines are left out. */
export const MAX_SERVICE_HEADER_BYTES = 64 * 1024;
/** Mutations one result may carry. */
export const MAX_HEADER_MUTATIONS = 64;
/** Name and value bytes of one result's mutations. */
export const MAX_HEADER_MUTATION_BYTES = 32 * 1024;

/** Never shown to a service, never written by one. */
const WITHHELD: ReadonlySet<string> = new Set([
  // credentials
  'authorization',
  'proxy-authorization',
  'cookie',
  // routing
  'host',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
  'via',
  // framing and hop-by-hop
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'expect',
]);

/** Shown, but a service may not change them: policy read the request through them (body parse, method override). */
const READ_BY_POLICY: ReadonlySet<string> = new Set(['content-type', 'content-encoding', 'x-http-method-override', 'x-http-method', 'x-method-override']);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[\0\r\n]/;

function withheld(lower: string): boolean {
  return WITHHELD.has(lower) || lower.startsWith('x-boundary-') || lower.startsWith('sec-websocket-');
}

/** What the service is shown of `flat` (`[name, value, ...]`): lower-cased names in wire order, a placeholder's line left out. */
export function serviceHeaders(flat: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  let bytes = 0;
  for (let i = 0; i < flat.length && out.length < MAX_SERVICE_HEADER_LINES; i += 2) {
    const name = (flat[i] ?? '').toLowerCase();
    const value = (flat[i + 1] ?? '').trim();
    // A line carrying a placeholder names a credential: the service is shown neither it nor the key's name.
    if (withheld(name) || containsMarker(value)) continue;
    bytes += name.length + value.length;
    if (bytes > MAX_SERVICE_HEADER_BYTES) break;
    out.push([name, value]);
  }
  return out;
}

/** What is wrong with a result's mutations, or undefined when every one may be applied. */
export function mutationProblem(mutations: readonly HeaderMutation[]): string | undefined {
  if (mutations.length > MAX_HEADER_MUTATIONS) return `more than ${MAX_HEADER_MUTATIONS} header mutations`;
  let bytes = 0;
  for (const m of mutations) {
    const lower = m.name.toLowerCase();
    if (!TOKEN.test(m.name)) return 'a header mutation names an invalid field';
    if (withheld(lower) || READ_BY_POLICY.has(lower)) return `a header mutation touches the protected field ${lower}`;
    bytes += m.name.length;
    if (m.op === 'write') {
      if (BAD_VALUE.test(m.value)) return 'a header mutation writes CR, LF or NUL';
      // A placeholder would be swapped for a secret on its way upstream: only the workload may ask for that.
      if (containsMarker(m.value)) return 'a header mutation writes credential placeholder syntax';
      bytes += m.value.length;
    }
  }
  return bytes > MAX_HEADER_MUTATION_BYTES ? `header mutations carry more than ${MAX_HEADER_MUTATION_BYTES} bytes` : undefined;
}

/** `flat` with `mutations` applied in order (validated by mutationProblem first). */
export function applyMutations(flat: readonly string[], mutations: readonly HeaderMutation[]): string[] {
  let out = [...flat];
  for (const m of mutations) {
    const lower = m.name.toLowerCase();
    const present = (): boolean => out.some((name, i) => i % 2 === 0 && name.toLowerCase() === lower);
    if (m.op === 'remove' || (m.op === 'write' && m.onExisting === 'overwrite')) out = withoutHeader(out, lower);
    if (m.op === 'write' && !(m.onExisting === 'skip' && present())) out.push(m.name, m.value);
  }
  return out;
}
