// decide() reference table rows for L4 matching: host runtime matching (label-bounded, apex never matched, IDNA,
// HA-14 to HA-17), the hostless allowed_ips form, ports, and requests on an uninspected endpoint.

import { ALLOW_L4, caseTable, conn, type DecideCase, hostPolicy, l4Policy, MISS, req, restPolicy } from './decide-table.js';

const { cases, add } = caseTable();

// docs/policy.md#host-matching: host runtime matching (label-bounded, apex never matched), plus HA-14/15/16/17.
const HOST_ROWS: readonly (readonly [pattern: string, host: string, match: boolean])[] = [
  ['*.example.com', 'a.example.com', true],
  ['*.example.com', 'a.b.example.com', false],
  ['*.example.com', 'example.com', false],
  ['*.example.com', 'evilexample.com', false],
  ['*.example.com', 'a.example.com.evil.net', false],
  ['*.example.com', '_svc.example.com', true],
  ['**.example.com', 'a.b.c.example.com', true],
  ['**.example.com', 'a.example.com', true],
  ['**.example.com', 'example.com', false],
  ['**.example.com', 'notexample.com', false],
  ['*-ai.example.com', 'us-ai.example.com', true],
  ['*-ai.example.com', 'x.us-ai.example.com', false],
  ['*-ai.example.com', 'us-ml.example.com', false],
  ['*.s3.*.amazonaws.com', 'b.s3.us-east-1.amazonaws.com', true],
  ['*.s3.*.amazonaws.com', 'b.s3.a.b.amazonaws.com', false],
  ['*.s3.*.amazonaws.com', 's3.us-east-1.amazonaws.com', false],
  ['api.*.example.com', 'api.eu.example.com', true],
  ['api.*.example.com', 'api.eu.west.example.com', false],
  ['api.*.example.com', 'www.eu.example.com', false],
  ['api.example.com', 'api.example.com', true],
  ['API.Example.COM', 'api.example.com', true],
  ['api.example.com.', 'api.example.com', true],
  ['api.example.com', 'api.example.com.evil.net', false],
  ['api.example.com', 'www.api.example.com', false],
  // IDNA: policy in U-labels, request already A-labels; and the reverse (request was bücher.example).
  ['bücher.example', 'xn--bcher-kva.example', true],
  ['BÜCHER.example', 'xn--bcher-kva.example', true],
  ['xn--bcher-kva.example', 'xn--bcher-kva.example', true],
  ['*.bücher.example', 'shop.xn--bcher-kva.example', true],
  ['*.xn--mnchen-3ya.example.com', 'a.xn--mnchen-3ya.example.com', true],
  ['bücher.example', 'bucher.example', false],
  // HA-16: `аpi` with a Cyrillic а is a different A-label.
  ['api.example.com', 'xn--pi-6kc.example.com', false],
  // HA-17: an IP literal never matches a name pattern, and a name never matches an IP-literal host.
  ['*.example.com', '1.2.3.4', false],
  ['**.example.com', '203.0.113.9', false],
  ['*.example.com', '2001:db8::1', false],
  ['10.0.0.7', '10.0.0.7', true],
  ['10.0.0.7', '10.0.0.8', false],
  ['10.0.0.7', 'ten.example.com', false],
  ['2001:DB8:0::10', '2001:db8::10', true],
  ['2001:db8::10', '2001:db8::11', false],
];
for (const [pattern, host, match] of HOST_ROWS) {
  add('host', `${pattern} vs ${host}`, hostPolicy(pattern), conn(host), match ? { ...ALLOW_L4, policy: 'p', endpointIndex: 0 } : MISS);
}

// Hostless allowed_ips: any host on the port (the address check happens later, in SSRF).
const HOSTLESS = l4Policy('{ port: 5432, allowed_ips: [10.20.0.0/16] }');
add('hostless', 'a name on the port', HOSTLESS, conn('db.internal.example', 5432), { ...ALLOW_L4, policy: 'p' });
add('hostless', 'an IP literal on the port', HOSTLESS, conn('10.20.1.1', 5432), { ...ALLOW_L4, policy: 'p' });
add('hostless', 'an unrelated name on the port', HOSTLESS, conn('anything.example.org', 5432), ALLOW_L4);
add('hostless', 'another port', HOSTLESS, conn('db.internal.example', 5433), MISS);

// Ports: multi-port, port+ports (ports wins), edges.
const MULTI_PORT = l4Policy('{ host: www.example.com, ports: [80, 443, 8443] }');
for (const port of [80, 443, 8443]) add('ports', `listed port ${port}`, MULTI_PORT, conn('www.example.com', port), ALLOW_L4);
for (const port of [8080, 22, 853, 65535]) add('ports', `unlisted port ${port}`, MULTI_PORT, conn('www.example.com', port), MISS);
const PORT_AND_PORTS = l4Policy('{ host: www.example.com, port: 80, ports: [443] }');
add('ports', 'ports wins over port: 443 allowed', PORT_AND_PORTS, conn('www.example.com', 443), ALLOW_L4);
add('ports', 'ports wins over port: 80 denied', PORT_AND_PORTS, conn('www.example.com', 80), MISS);
add('ports', 'an L7 request on an unlisted port', restPolicy(['{ method: GET, path: "/**" }']), { ...req('GET', '/'), port: 8443 }, MISS);

// Requests on an L4 endpoint are allowed at L4: nothing inspects them.
add('layer', 'a request on an uninspected endpoint', hostPolicy('api.example.com'), req('DELETE', '/anything'), { ...ALLOW_L4, policy: 'p' });

export const HOST_CASES: readonly DecideCase[] = cases;
