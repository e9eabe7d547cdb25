// Deterministic large policies for size-limit, compile-time and reload tests (and the policy benchmark): a mix
// of exact hosts, wildcards, IP literals, multi-port endpoints and rest endpoints with rules, all valid and
// unambiguous, so parsePolicy does every check and still accepts the result.

/** Endpoints per network_policies entry; a real policy groups a few endpoints under one binary. */
const ENDPOINTS_PER_ENTRY = 10;

export interface LargePolicyOptions {
  /** Total endpoints across all entries. */
  readonly endpoints: number;
  /** Rules on each rest endpoint (default 2). */
  readonly rulesPerRestEndpoint?: number;
  /** Varies every host, so two policies of the same size hash differently (a reload that really changes). */
  readonly salt?: string;
}

/** The YAML text of a valid policy with exactly `endpoints` endpoints. */
export function largePolicyText(options: LargePolicyOptions): string {
  const rules = options.rulesPerRestEndpoint ?? 2;
  const salt = options.salt ?? 's';
  const lines = ['version: 1', 'network_policies:'];
  for (let i = 0; i < options.endpoints; i++) {
    const entry = Math.floor(i / ENDPOINTS_PER_ENTRY);
    if (i % ENDPOINTS_PER_ENTRY === 0) lines.push(`  svc_${entry}:`, `    name: svc-${entry}`, '    endpoints:');
    lines.push(...endpointLines(i, entry, salt, rules));
    if (i % ENDPOINTS_PER_ENTRY === ENDPOINTS_PER_ENTRY - 1 || i === options.endpoints - 1) {
      lines.push('    binaries:', `      - path: /usr/bin/svc-${entry}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

function endpointLines(i: number, entry: number, salt: string, rules: number): string[] {
  const domain = `${salt}${entry}.example.test`;
  switch (i % 5) {
    case 0:
      if (i % 10 === 5) {
        return [`      - { host: api.${salt}.example.test, port: 443, path: "/pkg${i}/**", protocol: rest, enforcement: enforce, access: read-only }`];
      }
      return [`      - { host: api-${i}.${domain}, port: 443 }`];
    case 1:
      // Wildcards that share a suffix bucket with the exact hosts above, so the V13 cross-checks run.
      return [`      - { host: "*.w${i}.${domain}", port: 443 }`];
    case 2:
      return [`      - { host: "**.g${i}.${domain}", ports: [80, 443, 8443] }`];
    case 3: {
      // One shared API host with a path per service: the shape that made the pairwise V13 check quadratic.
      const out = [`      - host: api.${salt}.example.test`, `        path: "/svc${i}/**"`, '        port: 443', '        protocol: rest', '        enforcement: enforce', '        rules:'];
      for (let r = 0; r < rules; r++) {
        out.push(`          - allow: { method: ${r % 2 === 0 ? 'GET' : 'POST'}, path: "/v${r}/items/**" }`);
      }
      return out;
    }
    default:
      return [`      - { host: 10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}, port: 5432 }`];
  }
}
