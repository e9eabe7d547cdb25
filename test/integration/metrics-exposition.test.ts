import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { METRICS } from '../../src/app/metric-catalogue.js';
import { restPolicy, startAttached } from '../harness/attached-boundary.js';
import { startBoundary, type RunningBoundary } from '../harness/boundary.js';
import { makeTestPki } from '../harness/certs.js';
import { startTestSupervisor } from '../harness/control.js';
import { buildQuery, udpQuery } from '../harness/dns-client.js';
import { openTunnel, sendRequest, tlsOverTunnel } from '../harness/proxy-client.js';
import { httpOrigin, type Origin, tlsOrigin } from '../harness/servers.js';

const PROMTOOL = '/usr/bin/promtool';
const SKIP_PROMTOOL = existsSync(PROMTOOL) ? false : `promtool not found at ${PROMTOOL} (Debian package prometheus)`;
/** Strings of the mixed run that must never show up in a label. */
const REQUEST_STRINGS = ['api.example.test', 'denied.example.test', 'nowhere.example.test', 'secret-path-x1', 'deny-path-y2', 'q=needle', '127.0.0.1'];

function policyFor(port: number, tlsPort: number): string {
  return `version: 1
network_policies:
  api_access:
    name: api access
    endpoints:
      - host: api.example.test
        port: ${port}
    binaries: [{ path: "/**" }]
  api_inspected:
    endpoints:
      - host: api.example.test
        port: ${tlsPort}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "/**" }
    binaries: [{ path: "/**" }]
`;
}

async function metricsText(port: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(response.status, 200);
  return response.text();
}

/** Every label value of every sample line. */
function labelValues(text: string): string[] {
  const values: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const open = line.indexOf('{');
    if (open < 0) continue;
    for (const match of line.slice(open, line.lastIndexOf('}') + 1).matchAll(/="((?:[^"\\]|\\.)*)"/g)) values.push(match[1] ?? '');
  }
  return values;
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function promtoolCheck(text: string): Promise<{ code: number | null; output: string }> {
  const child = spawn(PROMTOOL, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  child.stdin.end(text);
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, output };
}

describe('boundary /metrics after a mixed run', () => {
  let origin: Origin;
  let tlsApi: Origin;
  let b: RunningBoundary;
  let text: string;

  before(async () => {
    origin = await httpOrigin();
    const pki = await makeTestPki();
    tlsApi = await tlsOrigin({ ca: pki.ca });
    b = await startBoundary({ policy: policyFor(origin.port, tlsApi.port), names: { 'denied.example.test': ['127.0.0.1'] }, upstreamCaPem: pki.ca.certPem });
    const allowed = await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/secret-path-x1?q=needle` });
    assert.equal(allowed.status, 200);
    const denied = await sendRequest({ proxyPort: b.proxyPort, path: `http://denied.example.test:${origin.port}/deny-path-y2` });
    assert.equal(denied.status, 403);
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${origin.port}`);
    assert.equal(tunnel.status, 200);
    tunnel.socket.destroy();
    // An inspected tunnel: boundary serves a leaf to the client and verifies the origin (both handshake sides).
    const inspected = await openTunnel(b.proxyPort, `api.example.test:${tlsApi.port}`);
    assert.equal(inspected.status, 200);
    assert.ok(b.caPem !== undefined, 'the interception CA is loaded');
    const tls = await tlsOverTunnel(inspected.socket, { servername: 'api.example.test', ca: b.caPem });
    const inner = await sendRequest({ socket: tls, path: '/inspected', headers: { host: `api.example.test:${tlsApi.port}`, connection: 'close' } });
    assert.equal(inner.status, 200);
    const refused = await openTunnel(b.proxyPort, `denied.example.test:${origin.port}`);
    assert.equal(refused.status, 403);
    refused.socket.destroy();
    assert.ok(b.dnsPort !== undefined);
    await udpQuery(b.dnsPort, buildQuery('api.example.test', 'A'));
    await udpQuery(b.dnsPort, buildQuery('api.example.test', 'AAAA'));
    await udpQuery(b.dnsPort, buildQuery('nowhere.example.test', 'A'));
    await udpQuery(b.dnsPort, buildQuery('nowhere.example.test', 'MX'));
    text = await metricsText(b.adminPort);
  });

  after(async () => {
    await b?.close();
    await origin?.close();
    await tlsApi?.close();
  });

  it('puts no request host, path, query or address into any label', () => {
    const values = labelValues(text);
    assert.ok(values.length > 100, `only ${values.length} label values`);
    for (const value of values) {
      for (const needle of REQUEST_STRINGS) assert.equal(value.includes(needle), false, `label value ${JSON.stringify(value)} holds ${needle}`);
    }
  });

  it('counts by adapter, verdict, reason and policy name, with pre-created zeros', () => {
    assert.ok((sample(text, 'boundary_decisions_total{adapter="forward",verdict="allow"}') ?? 0) >= 1);
    assert.ok((sample(text, 'boundary_decisions_total{adapter="forward",verdict="deny"}') ?? 0) >= 1);
    assert.ok((sample(text, 'boundary_decisions_total{adapter="connect",verdict="deny"}') ?? 0) >= 1);
    assert.ok((sample(text, 'boundary_decisions_total{adapter="dns",verdict="allow"}') ?? 0) >= 1);
    assert.equal(sample(text, 'boundary_decisions_total{adapter="transparent",verdict="audit"}'), 0);
    assert.ok((sample(text, 'boundary_denials_total{reason="no-endpoint-matched"}') ?? 0) >= 2);
    assert.ok((sample(text, 'boundary_policy_decisions_total{verdict="allow",policy="api_access"}') ?? 0) >= 2);
    assert.equal(sample(text, 'boundary_policy_decisions_total{verdict="audit",policy="api_access"}'), 0);
    assert.ok((sample(text, 'boundary_dns_queries_by_type_total{qtype="AAAA",rcode="NOERROR"}') ?? 0) >= 1);
    assert.equal(sample(text, 'boundary_policy_reloads_total{source="file",outcome="loaded"}'), 1);
    assert.equal(sample(text, 'boundary_policy_generation'), 1);
    assert.equal(sample(text, 'boundary_ready'), 1);
    assert.equal(sample(text, 'boundary_control_state{state="idle"}'), 0);
  });

  it('times each decision decide() makes, and not an answer remembered for the same policy (docs/metrics.md)', async () => {
    const decisions = (t: string) => (sample(t, 'boundary_decisions_total{adapter="forward",verdict="allow"}') ?? 0) + (sample(t, 'boundary_decisions_total{adapter="forward",verdict="deny"}') ?? 0);
    const timed = (t: string) => sample(t, 'boundary_decision_duration_seconds_count') ?? 0;
    const before = await metricsText(b.adminPort);
    // Asked before (in the mixed run): the l4 memo answers both, so nothing is timed.
    assert.equal((await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/secret-path-x1` })).status, 200);
    assert.equal((await sendRequest({ proxyPort: b.proxyPort, path: `http://denied.example.test:${origin.port}/deny-path-y2` })).status, 403);
    const remembered = await metricsText(b.adminPort);
    assert.equal(decisions(remembered) - decisions(before), 2);
    assert.equal(timed(remembered), timed(before));
    // A host:port never asked: decide() runs, and is timed once.
    assert.equal((await sendRequest({ proxyPort: b.proxyPort, path: `http://unasked.example.test:${origin.port}/` })).status, 403);
    const evaluated = await metricsText(b.adminPort);
    assert.equal(decisions(evaluated) - decisions(remembered), 1);
    assert.equal(timed(evaluated) - timed(remembered), 1);
  });

  it('exposes build info, process defaults and the request-path histograms', () => {
    assert.match(text, /^boundary_build_info\{version="\d+\.\d+\.\d+[^"]*",node="v\d+[^"]*"\} 1$/m);
    assert.match(text, /^process_cpu_user_seconds_total /m);
    assert.match(text, /^nodejs_eventloop_lag_seconds /m);
    for (const name of ['boundary_decision_duration_seconds', 'boundary_upstream_connect_duration_seconds', 'boundary_upstream_first_byte_duration_seconds', 'boundary_dns_answer_duration_seconds', 'boundary_http_response_bytes']) {
      assert.ok((sample(text, `${name}_count`) ?? 0) >= 1, `${name}_count`);
    }
    for (const side of ['client', 'upstream']) {
      assert.ok((sample(text, `boundary_tls_handshake_duration_seconds_count{side="${side}"}`) ?? 0) >= 1, `${side} TLS handshakes`);
    }
  });

  it('declares every series it exposes in the catalogue', () => {
    const declared = new Set(Object.keys(METRICS));
    for (const line of text.split('\n')) {
      const match = /^# TYPE (\S+) /.exec(line);
      if (match === null || !match[1]?.startsWith('boundary_')) continue;
      assert.ok(declared.has(match[1]), `${match[1]} is not in src/metric-catalogue.ts`);
    }
  });

  it('passes promtool check metrics', { skip: SKIP_PROMTOOL }, async () => {
    const { code, output } = await promtoolCheck(text);
    assert.equal(code, 0, output);
  });
});

describe('supervisor /metrics', () => {
  it('serves process defaults and its certificate expiry, and passes promtool check metrics', { skip: SKIP_PROMTOOL }, async (t) => {
    const pki = await makeTestPki();
    const sup = await startTestSupervisor(pki, { policies: {}, config: { metricsListen: { host: '127.0.0.1', port: 0 } } });
    t.after(() => sup.close());
    const port = sup.supervisor.metricsAddress()?.port;
    assert.ok(port !== undefined);
    const text = await metricsText(port);
    assert.match(text, /^process_cpu_user_seconds_total /m);
    assert.match(text, /^nodejs_heap_size_used_bytes /m);
    const { code, output } = await promtoolCheck(text);
    assert.equal(code, 0, output);
  });
});

describe('attached boundary /metrics', () => {
  it('shows the control channel state, forwarded events and a control-sourced policy load', async (t) => {
    const pki = await makeTestPki();
    const origin = await httpOrigin();
    t.after(() => origin.close());
    const sup = await startTestSupervisor(pki, { policies: { 'sb-1': restPolicy(origin.port, '/v1/**') } });
    t.after(() => sup.close());
    const b = await startAttached(pki, sup);
    t.after(() => b.close());
    await b.waitState((s) => s.policy.effective);
    // The client sends one events batch at a time: once a second batch reaches the supervisor, the first was
    // acknowledged and counted as forwarded. A request in between makes sure there is a second batch to send.
    const first = await sup.waitFor((e) => e.type === 'events');
    await sendRequest({ proxyPort: b.proxyPort, path: `http://api.example.test:${origin.port}/v1/counted` });
    await sup.waitFor((e) => e.type === 'events' && e !== first);
    const text = await metricsText(b.adminPort);
    assert.ok((sample(text, 'boundary_control_events_total{outcome="forwarded"}') ?? 0) >= 1, 'the acknowledged batch is counted');
    assert.equal(sample(text, 'boundary_control_events_total{outcome="dropped"}'), 0);
    assert.equal(sample(text, 'boundary_control_state{state="attached"}'), 1);
    assert.equal(sample(text, 'boundary_control_state{state="waiting"}'), 0);
    assert.equal(sample(text, 'boundary_control_reconnects_total{kind="tls-auth"}'), 0);
    assert.ok((sample(text, 'boundary_policy_reloads_total{source="control",outcome="loaded"}') ?? 0) >= 1);
    assert.match(text, /^boundary_control_certificate_expiry_seconds \d+/m);
  });
});
