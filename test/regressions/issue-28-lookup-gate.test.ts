// Regression of issue 28, finding 3 ("DNS exfiltration through the proxy's own lookups"): policy DNS rate-limited
// new names under a wildcard and screened tunnelling-shaped ones, but a CONNECT, forward request or HTTP/2 stream to
// a fresh name under an allowed wildcard was resolved upstream with neither (2,000 base32 labels of 60 characters in
// 1.1 s, no finding). Now every upstream lookup passes one gate (src/net/lookup-gate.ts) built once by the composition
// root: one new-name budget, one tunnelling screen, shared state. Each adapter floods fresh base32-shaped names at a
// real boundary whose production resolver asks a loopback DNS server, on a frozen clock, and the names that reached
// that server are counted.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect as h2Connect } from 'node:http2';
import { connect } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { decode } from 'dns-packet';
import { LIMIT_REPORT_INTERVAL_MS } from '../../src/net/lookup-tally.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { testClock } from '../harness/clock.js';
import { buildQuery, rcodeOf, udpExchange } from '../harness/dns-client.js';
import { type DnsFixture, startDnsFixture } from '../harness/dns-upstream.js';
import { type H2Origin, h2cOrigin } from '../harness/h2-origin.js';
import { metric } from '../harness/liveness.js';
import { json, openTunnel, readAll, readHead, sendRequest } from '../harness/proxy-client.js';
import { seeded } from '../harness/seeded.js';
import { type EchoServer, echoServer, httpOrigin, type Origin } from '../harness/servers.js';

/** The new-name burst under test (`--new-names-burst`); the rate is 1/s on a clock that does not move. */
const BUDGET = 20;
/** Fresh names per flood: twice the budget. */
const FLOOD = 2 * BUDGET;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** `count` fresh names of one 60-character base32 label under `zone`: what the red team sent. */
function base32Names(zone: string, count: number, seed: number): string[] {
  const random = seeded(seed);
  return Array.from({ length: count }, () => `${Array.from({ length: 60 }, () => BASE32[Math.floor(random() * 32)]).join('')}.${zone}`);
}

interface Stack {
  readonly b: RunningBoundary;
  readonly fixture: DnsFixture;
  readonly origin: Origin;
  readonly echo: EchoServer;
  readonly h2: H2Origin;
  readonly clock: ReturnType<typeof testClock>;
  /** Every name the loopback upstream was asked, once each. */
  asked(): Set<string>;
}

async function start(t: TestContext, options: { tunnelDetection?: 'off' | 'audit' | 'enforce'; burst?: number } = {}): Promise<Stack> {
  const fixture = await startDnsFixture({ 'api.example.test': { a: ['127.0.0.1'], ttl: 30 } });
  const origin = await httpOrigin();
  const echo = await echoServer();
  const h2 = await h2cOrigin();
  const clock = testClock();
  const b = await startBoundary({
    upstreamDns: { host: fixture.host, port: fixture.port },
    now: clock.now,
    newNames: { perSecond: 1, burst: options.burst ?? BUDGET },
    ...(options.tunnelDetection === undefined ? {} : { tunnelDetection: options.tunnelDetection }),
    policy: `version: 1
network_policies:
  wild:
    endpoints:
      - { host: "*.t.example.test", port: ${origin.port} }
      - { host: "*.t.example.test", port: ${echo.port}, protocol: tcp }
      - { host: "*.h.example.test", port: ${h2.port}, protocol: rest, enforcement: enforce, access: full }
      - { host: api.example.test, port: ${origin.port} }
    binaries: [{ path: "/**" }]
`,
  });
  t.after(async () => {
    await b.close();
    await Promise.all([fixture.close(), origin.close(), echo.close(), h2.close()]);
  });
  return { b, fixture, origin, echo, h2, clock, asked: () => new Set(fixture.queries.map((q) => q.name)) };
}

/** Every name resolves to loopback at the fixture: whatever reaches it is answered, and counted. */
function served(s: Stack, names: readonly string[]): readonly string[] {
  for (const name of names) s.fixture.set(name, { a: ['127.0.0.1'], ttl: 30 });
  return names;
}

async function dnsRcode(s: Stack, name: string): Promise<{ rcode: string; address: string | undefined }> {
  const reply = await udpExchange(s.b.dnsPort ?? 0, buildQuery(name));
  assert.ok(reply !== undefined, `an answer for ${name}`);
  const packet = decode(reply);
  return { rcode: rcodeOf(packet), address: (packet.answers?.[0] as { data?: string } | undefined)?.data };
}

function tally(values: readonly (string | number)[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[String(v)] = (out[String(v)] ?? 0) + 1;
  return out;
}

/**
 * What every flood must leave behind: exactly the budget of names at the upstream, the rest refused; a tunnelling
 * finding for every flagged name and a rate-limit report for every refused one (the held-back counts written once the
 * interval passed), both counted in the metrics.
 */
async function assertBudgetHeld(s: Stack, names: readonly string[], via: 'dns' | 'proxy'): Promise<void> {
  const asked = s.asked();
  assert.equal(names.filter((n) => asked.has(n)).length, BUDGET, 'only the budget of fresh names reached the upstream resolver');
  assert.equal(asked.size, BUDGET, 'and nothing else');
  assert.equal(s.b.boundary.lookups.stats().rateLimited, FLOOD - BUDGET);
  s.clock.advance(LIMIT_REPORT_INTERVAL_MS);
  s.b.boundary.lookups.tick();
  const events = s.b.log.events();
  const limited = events.filter((e) => e.status_detail === 'policy_dns_rate_limited');
  assert.equal(limited.reduce((n, e) => n + Number(e.unmapped.queries), 0), FLOOD - BUDGET);
  assert.ok(limited.every((e) => e.unmapped.limit === 'unique'));
  assert.equal(limited.reduce((n, e) => n + Number((e.unmapped.by_adapter as Record<string, number>)[via]), 0), FLOOD - BUDGET);
  const findings = events.filter((e) => e.status_detail === 'policy_dns_tunnel_suspected');
  assert.ok(findings.length >= 1, 'a Detection Finding');
  assert.equal(findings[0]?.class_uid, 2004);
  assert.deepEqual(findings[0]?.unmapped.signals, ['base32-encoded']);
  assert.equal(findings.reduce((n, e) => n + Number(e.unmapped.flagged_names), 0), FLOOD, 'every fresh name was screened and flagged');
  assert.equal(await metric(s.b, 'boundary_dns_rate_limited_total{limit="unique"}'), FLOOD - BUDGET);
  assert.equal(await metric(s.b, 'boundary_dns_tunnel_names_total{mode="audit"}'), FLOOD);
}

/** The proxy's decision events for refused lookups: one each, with the closed reason. */
function assertDecisions(s: Stack, reason: string, count: number): void {
  const refused = s.b.log.decisions().filter((e) => e.unmapped.reason_code === reason);
  assert.equal(refused.length, count, `${count} decision events with reason ${reason}`);
}

describe('issue 28: every upstream lookup passes one gate', () => {
  it('policy DNS over UDP: the budget of fresh names goes upstream, the rest are REFUSED', async (t) => {
    const s = await start(t);
    const names = served(s, base32Names('t.example.test', FLOOD, 1));
    const rcodes: string[] = [];
    for (const name of names) rcodes.push((await dnsRcode(s, name)).rcode);
    assert.deepEqual(tally(rcodes), { NOERROR: BUDGET, REFUSED: FLOOD - BUDGET });
    await assertBudgetHeld(s, names, 'dns');
  });

  it('CONNECT: 200 for the budget, then 429 lookup_rate_limited with Retry-After and one decision event each', async (t) => {
    const s = await start(t);
    const names = served(s, base32Names('t.example.test', FLOOD, 2));
    const statuses: number[] = [];
    for (const name of names) {
      const opened = await openTunnel(s.b.proxyPort, `${name}:${s.origin.port}`);
      statuses.push(opened.status);
      if (opened.status === 429) {
        assert.match(opened.head, /\r\nretry-after: \d+\r\n/i);
        const raw = await readAll(opened.socket, opened.rest);
        const body = JSON.parse(raw.slice(raw.indexOf('{'))) as Record<string, unknown>;
        assert.equal(body.error, 'lookup_rate_limited');
        assert.equal((body.next_steps as { kind: string }[])[0]?.kind, 'retry_later');
      }
      opened.socket.destroy();
    }
    assert.deepEqual(tally(statuses), { 200: BUDGET, 429: FLOOD - BUDGET });
    assertDecisions(s, 'lookup-rate-limited', FLOOD - BUDGET);
    await assertBudgetHeld(s, names, 'proxy');
  });

  it('forward HTTP: the origin answers the budget, the rest get a 429 JSON body that says to retry later', async (t) => {
    const s = await start(t);
    const names = served(s, base32Names('t.example.test', FLOOD, 3));
    const statuses: number[] = [];
    for (const name of names) {
      const response = await sendRequest({ proxyPort: s.b.proxyPort, path: `http://${name}:${s.origin.port}/` });
      statuses.push(response.status);
      if (response.status === 429) {
        const body = json(response);
        assert.equal(body.error, 'lookup_rate_limited');
        assert.equal(body.reason, 'lookup-rate-limited');
        assert.ok(Number(response.headers['retry-after']) >= 1);
        assert.equal((body.next_steps as { kind: string }[])[0]?.kind, 'retry_later');
      }
    }
    assert.deepEqual(tally(statuses), { 200: BUDGET, 429: FLOOD - BUDGET });
    assertDecisions(s, 'lookup-rate-limited', FLOOD - BUDGET);
    await assertBudgetHeld(s, names, 'proxy');
  });

  it('transparent capture: only names policy DNS let through get an address to connect to', async (t) => {
    const s = await start(t);
    const names = served(s, base32Names('t.example.test', FLOOD, 4));
    let echoed = 0;
    for (const name of names) {
      const { rcode, address } = await dnsRcode(s, name);
      if (rcode !== 'NOERROR' || address === undefined) continue;
      const socket = connect({ host: address, port: s.echo.port });
      await once(socket, 'connect');
      socket.write('ping');
      const [data] = (await once(socket, 'data')) as [Buffer];
      if (data.toString() === 'ping') echoed++;
      socket.destroy();
    }
    assert.equal(echoed, BUDGET);
    await assertBudgetHeld(s, names, 'dns');
  });

  it('HTTP/2 inside an inspected tunnel: streams never resolve, and each tunnel to a fresh name is charged', async (t) => {
    const s = await start(t);
    const names = served(s, base32Names('h.example.test', FLOOD, 5));
    const statuses: (number | string)[] = [];
    for (const [i, name] of names.entries()) {
      const authority = `${name}:${s.h2.port}`;
      const opened = await openTunnel(s.b.proxyPort, authority);
      if (opened.status !== 200) {
        statuses.push(`CONNECT ${opened.status}`);
        opened.socket.destroy();
        continue;
      }
      const session = h2Connect(`http://${authority}`, { createConnection: () => opened.socket });
      session.on('error', () => undefined);
      const ask = (asAuthority: string): Promise<number> =>
        new Promise((resolve, reject) => {
          const stream = session.request({ ':method': 'GET', ':path': '/', ':authority': asAuthority });
          stream.on('response', (headers) => resolve(Number(headers[':status'])));
          stream.on('error', reject);
          stream.resume();
        });
      statuses.push(await ask(authority));
      // In the first tunnel, streams naming other fresh names: refused before any lookup (the authority must be the tunnel's).
      if (i === 0) {
        for (const other of base32Names('h.example.test', 5, 50)) assert.equal(await ask(`${other}:${s.h2.port}`), 403);
      }
      session.destroy();
    }
    assert.deepEqual(tally(statuses), { 200: BUDGET, 'CONNECT 429': FLOOD - BUDGET });
    await assertBudgetHeld(s, names, 'proxy');
  });

  it('WebSocket upgrades through the forward proxy: 101 for the budget, then 429', async (t) => {
    const s = await start(t);
    const names = served(s, base32Names('t.example.test', FLOOD, 6));
    const statuses: number[] = [];
    for (const name of names) {
      const socket = connect({ host: '127.0.0.1', port: s.b.proxyPort });
      await once(socket, 'connect');
      socket.write(
        `GET http://${name}:${s.origin.port}/socket HTTP/1.1\r\nHost: ${name}:${s.origin.port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
      statuses.push((await readHead(socket)).status);
      socket.destroy();
    }
    assert.deepEqual(tally(statuses), { 101: BUDGET, 429: FLOOD - BUDGET });
    assertDecisions(s, 'lookup-rate-limited', FLOOD - BUDGET);
    await assertBudgetHeld(s, names, 'proxy');
  });
});

describe('issue 28: the gate is one object, its state shared by policy DNS and the proxy', () => {
  it('charges a name once whichever adapter asks first, and never a name resolved or listed exactly', async (t) => {
    const s = await start(t, { burst: 2 });
    const [a, b, c] = served(s, base32Names('t.example.test', 3, 7)) as [string, string, string];
    assert.equal((await dnsRcode(s, a)).rcode, 'NOERROR');
    assert.equal((await sendRequest({ proxyPort: s.b.proxyPort, path: `http://${a}:${s.origin.port}/` })).status, 200, 'resolved by DNS: not new to the proxy');
    assert.equal((await openTunnel(s.b.proxyPort, `${b}:${s.origin.port}`)).status, 200);
    assert.equal((await dnsRcode(s, b)).rcode, 'NOERROR', 'resolved by the proxy: not new to DNS');
    assert.equal(s.asked().size, 2, 'each name went upstream once');
    // The budget of 2 is spent: a third fresh name is refused on both paths, a listed name is never charged.
    assert.equal((await dnsRcode(s, c)).rcode, 'REFUSED');
    assert.equal((await sendRequest({ proxyPort: s.b.proxyPort, path: `http://${c}:${s.origin.port}/` })).status, 429);
    assert.equal((await sendRequest({ proxyPort: s.b.proxyPort, path: `http://api.example.test:${s.origin.port}/` })).status, 200);
    assert.equal((await dnsRcode(s, 'api.example.test')).rcode, 'NOERROR');
    assert.equal(s.b.boundary.lookups.stats().rateLimited, 2);
  });

  it('enforce: a tunnelling-shaped name is refused on every path, 403 lookup_tunnel_suspected on the proxy', async (t) => {
    const s = await start(t, { tunnelDetection: 'enforce' });
    const [name, other] = served(s, base32Names('t.example.test', 2, 8)) as [string, string];
    const response = await sendRequest({ proxyPort: s.b.proxyPort, path: `http://${name}:${s.origin.port}/` });
    assert.equal(response.status, 403);
    const body = json(response);
    assert.equal(body.error, 'lookup_tunnel_suspected');
    assert.deepEqual(body.signals, ['base32-encoded']);
    assert.equal((body.next_steps as { kind: string }[])[0]?.kind, 'not_allowable');
    assert.equal((await openTunnel(s.b.proxyPort, `${other}:${s.origin.port}`)).status, 403);
    assert.equal((await dnsRcode(s, name)).rcode, 'REFUSED');
    assert.equal(s.asked().size, 0, 'nothing reached the upstream resolver');
    assertDecisions(s, 'lookup-tunnel-suspected', 2);
    const [finding] = s.b.log.events().filter((e) => e.status_detail === 'policy_dns_tunnel_suspected');
    assert.equal(finding?.action_id, 2, 'DENIED');
    assert.equal(finding?.unmapped.mode, 'enforce');
    // An ordinary name under the same wildcard still resolves.
    assert.equal((await sendRequest({ proxyPort: s.b.proxyPort, path: `http://www.t.example.test:${s.origin.port}/` })).status, 502);
    assert.equal(s.asked().size, 1);
  });
});
