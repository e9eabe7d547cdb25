// An explain TARGET (`https://host[:port]/path?query` or `host:port`) -> the EgressIntent the proxy would build,
// for `boundary policy explain` and the admin listener's /v1/explain. Pure; a bad target is a value, not a throw.

import type { BinaryIdentityMode } from '../identity/source.js';
import { parseAuthority } from '../net/host.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { EgressIntent } from '../policy/types.js';
import { canonicalTarget } from '../chain/path.js';

const DEFAULT_PORTS: Readonly<Record<string, number>> = { 'http:': 80, 'https:': 443, 'ws:': 80, 'wss:': 443 };
const METHOD_TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/** Which argument was wrong: the CLI names the flag, the admin API the query parameter. */
export type TargetProblemField = 'target' | 'method' | 'binary';

export type TargetIntent =
  | { readonly ok: true; readonly intent: EgressIntent }
  | { readonly ok: false; readonly field: TargetProblemField; readonly message: string };

/**
 * No binary named under `required` (run's default): as a run that looked no process up, so an entry listing `/**`
 * matches, one listing no binaries (or an empty list) matches none, and one listing paths needs the binary named.
 */
const NO_BINARY_NAMED: IdentityClaim = Object.freeze({ kind: 'unavailable', failure: 'not-looked-up', detail: 'no binary was named: give --binary (binary= on /v1/explain)' });

export interface TargetOptions {
  readonly method?: string | undefined;
  readonly binary?: string | undefined;
  /** As `run --binary-identity`: `required` (the default) checks binaries, `endpoint-only` does not. */
  readonly binaryIdentity?: BinaryIdentityMode | undefined;
}

/** TARGET -> a normalised intent. The query is kept for decide() and never echoed. */
export function intentFromTarget(target: string, options: TargetOptions): TargetIntent {
  const { method, binary } = options;
  const mode = options.binaryIdentity ?? 'required';
  if (binary !== undefined && !binary.startsWith('/')) return { ok: false, field: 'binary', message: '--binary must be an absolute path' };
  if (method !== undefined && !METHOD_TOKEN.test(method)) return { ok: false, field: 'method', message: `--method '${method}' is not an HTTP method token` };
  const upper = method?.toUpperCase();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(target);
  const problem = (message: string): TargetIntent => ({ ok: false, field: 'target', message });
  let host: string;
  let port: number;
  let requestTarget: string | undefined;
  if (scheme) {
    const defaultPort = DEFAULT_PORTS[`${scheme[1]?.toLowerCase()}:`];
    if (defaultPort === undefined) return problem(`TARGET scheme '${scheme[1]}' is not http, https, ws or wss`);
    const rest = target.slice(scheme[0].length);
    const end = rest.search(/[/?#]/);
    const authority = end < 0 ? rest : rest.slice(0, end);
    const parsed = parseAuthority(authority, { defaultPort });
    if (!parsed.ok) return problem(`TARGET host: ${parsed.message}`);
    ({ host, port } = parsed);
    // Clients never send the fragment; drop it before canonicalising.
    // Spaces and non-ASCII typed into a URL are percent-encoded, as curl and browsers do.
    const tail = (end < 0 ? '' : rest.slice(end)).replace(/#.*$/s, '').replace(/[^\x21-\x7e]/gu, (c) => encodeURIComponent(c));
    requestTarget = tail === '' ? '/' : tail.startsWith('?') ? `/${tail}` : tail;
  } else {
    const parsed = parseAuthority(target);
    if (!parsed.ok) return problem(`TARGET must be a URL or host:port (${parsed.message})`);
    ({ host, port } = parsed);
    if (upper !== undefined) requestTarget = '/';
  }
  // The binary as a process without ancestors: what `--binary` names is all explain knows of it.
  const identity: IdentityClaim | undefined = mode === 'endpoint-only' ? undefined : binary === undefined ? NO_BINARY_NAMED : { kind: 'process', exe: binary, ancestors: [] };
  const base = { adapter: 'explain' as const, host, port, ...(identity === undefined ? {} : { identity }) };
  if (requestTarget === undefined) return { ok: true, intent: base };
  // Opt-in escapes are kept here; the endpoint's allow_encoded_* options are reported after the decision.
  const canonical = canonicalTarget(requestTarget, { allowEncodedSlash: true, allowEncodedBackslash: true, allowEncodedNul: true });
  if (!canonical.ok) return problem(`TARGET path is refused before any policy check (${canonical.problem})`);
  const intent = { ...base, method: upper ?? 'GET', path: canonical.path, ...(canonical.query === '' ? {} : { query: canonical.query }) };
  return { ok: true, intent };
}
