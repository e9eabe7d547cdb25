// Issue 29 (what boundary tells users is what it does): a request head node:http's parser refused (and an HTTP/2 client's
// connection error) left no event at all, only a metric, so a SIEM never saw the attempt. Each now has a denied event
// naming the parser's error, aggregated per kind and destination so a flood of malformed requests stays cheap.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { openTunnel, rawExchange, readAll, statusOf } from '../harness/proxy-client.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

/** Malformed heads of several kinds, as request smuggling tools mutate them. */
const MUTATIONS = [
  'GET http://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\nBad Header: y\r\n\r\n',
  'G@T http://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\n\r\n',
  'GET http://api.example.test/ HTTP/9.9\r\nHost: api.example.test\r\n\r\n',
  'POST http://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
];
/** Rounds of every mutation in the flood: bounded, sequential, loopback only. */
const FLOOD_ROUNDS = 25;

const policyFor = (port: number): string => `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules: [{ allow: { method: GET, path: "/**" } }]
    binaries: [{ path: "/**" }]
`;

const refusals = (b: RunningBoundary): OcsfEvent[] => b.log.events().filter((e) => typeof e.unmapped.parser_error === 'string');

describe('issue 29: requests a parser refused are logged', () => {
  let origin: Origin;
  let b: RunningBoundary;
  before(async () => {
    origin = await httpOrigin();
    b = await startBoundary({ policy: policyFor(origin.port) });
  });
  after(async () => {
    await b?.close();
    await origin?.close();
  });

  it('a malformed head on the proxy listener: 400 and a denied event naming the parser error', async () => {
    const raw = await rawExchange(b.proxyPort, 'GET http://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\nBad Header: y\r\n\r\n');
    assert.equal(statusOf(raw), 400);
    const event = await b.log.waitFor((e) => typeof e.unmapped.parser_error === 'string');
    assert.equal(event.action, 'Denied');
    assert.equal(event.unmapped.reason_code, 'bad-request');
    assert.equal(event.unmapped.adapter, 'forward');
    assert.equal(event.unmapped.status_code, 400);
    assert.match(String(event.unmapped.parser_error), /^HPE_/);
    assert.equal(event.firewall_rule?.type, 'protocol');
    assert.equal(event.src_endpoint?.ip, '127.0.0.1');
    assert.doesNotMatch(JSON.stringify(event), /Bad Header/, 'the refused bytes are never recorded');
  });

  it('a head too large: 431 and a head-too-large event', async () => {
    const raw = await rawExchange(b.proxyPort, `GET http://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assert.equal(statusOf(raw), 431);
    const event = await b.log.waitFor((e) => e.unmapped.reason_code === 'head-too-large' && typeof e.unmapped.parser_error === 'string');
    assert.equal(event.unmapped.status_code, 431);
  });

  it('a malformed head inside an inspected tunnel names the tunnel target', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${origin.port}`);
    assert.equal(tunnel.status, 200);
    tunnel.socket.write('GET / HTTP/1.1\r\nHost: api.example.test\r\nBad Header: y\r\n\r\n');
    assert.equal(statusOf(await readAll(tunnel.socket)), 400);
    const event = await b.log.waitFor((e) => typeof e.unmapped.parser_error === 'string' && e.unmapped.adapter === 'l7');
    assert.equal(event.dst_endpoint?.domain, 'api.example.test');
    assert.equal(event.dst_endpoint?.port, origin.port);
  });

  it('an HTTP/2 connection error in an inspected tunnel: an event naming the GOAWAY code', async () => {
    const tunnel = await openTunnel(b.proxyPort, `api.example.test:${origin.port}`);
    assert.equal(tunnel.status, 200);
    // The preface, then a PING where the client's SETTINGS must come first: PROTOCOL_ERROR for the connection.
    tunnel.socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), Buffer.from([0, 0, 8, 6, 0, 0, 0, 0, 0]), Buffer.alloc(8)]));
    await readAll(tunnel.socket);
    const event = await b.log.waitFor((e) => e.unmapped.parser_error === 'PROTOCOL_ERROR');
    assert.equal(event.unmapped.reason_code, 'bad-request');
    assert.equal(event.unmapped.http_version, '2');
    assert.equal(event.dst_endpoint?.port, origin.port);
  });
});

describe('issue 29: a flood of malformed requests is aggregated', () => {
  it(`${FLOOD_ROUNDS} rounds of ${MUTATIONS.length} mutations: one event per kind at once, the repeats counted`, async () => {
    const origin = await httpOrigin();
    const b = await startBoundary({ policy: policyFor(origin.port) });
    try {
      for (let round = 0; round < FLOOD_ROUNDS; round++) {
        for (const mutation of MUTATIONS) {
          const socket = connect({ host: '127.0.0.1', port: b.proxyPort, localAddress: '127.0.0.1' });
          socket.on('error', () => undefined);
          await once(socket, 'connect');
          socket.end(mutation);
          await readAll(socket);
        }
      }
      const kinds = new Set(refusals(b).map((e) => e.unmapped.parser_error));
      assert.ok(kinds.size >= 2, `several parser errors: ${[...kinds].join(', ')}`);
      assert.equal(refusals(b).length, kinds.size, 'only the first of each kind is written at once');
      // Another source's first attempt of a kind already seen is its own event, at once.
      const other = connect({ host: '127.0.0.1', port: b.proxyPort, localAddress: '127.0.0.2' });
      other.on('error', () => undefined);
      await once(other, 'connect');
      other.end(MUTATIONS[0] as string);
      await readAll(other);
      const fromOther = await b.log.waitFor((e) => typeof e.unmapped.parser_error === 'string' && e.src_endpoint?.ip === '127.0.0.2');
      assert.equal(fromOther.unmapped.count, undefined);
    } finally {
      await b.close();
      await origin.close();
    }
    const events = refusals(b).filter((e) => e.src_endpoint?.ip === '127.0.0.1');
    const total = events.reduce((sum, e) => sum + (typeof e.unmapped.count === 'number' ? e.unmapped.count : 1), 0);
    assert.equal(total, FLOOD_ROUNDS * MUTATIONS.length, 'every attempt is counted');
    assert.ok(events.length <= 2 * new Set(events.map((e) => e.unmapped.parser_error)).size);
    const counted = events.filter((e) => typeof e.unmapped.count === 'number');
    assert.ok(counted.length > 0, 'the repeats went out as counts');
    for (const e of counted) assert.equal(e.src_endpoint?.port, undefined, 'an aggregate names the source address, not a port');
  });
});
