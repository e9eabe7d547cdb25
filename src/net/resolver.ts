// The Resolver interface: upstream name -> addresses, with failures as values. Implementations:
// dns/upstream.ts (trusted upstream DNS over UDP/TCP, hosts file first) and test/harness fakeResolver().

const RESOLVE_FAILURES = [
  'nxdomain',
  'nodata',
  'timeout',
  'io-failed',
  'malformed-response',
  'oversized-response',
  'error-response',
  'cname-limit',
  // boundary's own query came back to its policy DNS (dns/own-queries.ts).
  'dns-loop',
] as const;
export type ResolveFailure = (typeof RESOLVE_FAILURES)[number];

export type ResolveResult =
  | { readonly ok: true; readonly addresses: readonly string[]; readonly ttlSeconds: number }
  | { readonly ok: false; readonly failure: ResolveFailure; readonly message: string };

export interface Resolver {
  /** `name` is already normalised (lower-case A-labels, no trailing dot) and is never an IP literal. */
  resolve(name: string, family: 4 | 6): Promise<ResolveResult>;
  /**
   * The answer resolve() would settle with right now without asking anyone (a fresh cache entry), else
   * undefined. Never starts a query. Lets the per-request path skip a promise round trip on a cache hit.
   */
  cached?(name: string, family: 4 | 6): ResolveResult | undefined;
}
