// The trusted upstream resolver (docs/dns.md#query-handling step 4): hosts table first, then DNS over UDP with TCP
// fallback on TC, CNAME chains, bounded answers. Failures are values; never throws once constructed.
// Never decides policy and never validates addresses (net/ssrf.ts does); it only reports what upstream said.

import { randomInt } from 'node:crypto';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect as tcpConnect } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import { HOSTS_TTL_SECONDS, type HostsTable } from '../net/hosts.js';
import { formatIp, parseIp } from '../net/ip.js';
import type { ResolveFailure, ResolveResult, Resolver } from '../net/resolver.js';
import { type DecodedPacket, decodePacket, encodePacket, RECURSION_DESIRED, type StringAnswer } from './packet.js';
import { MAX_DNS_MESSAGE_BYTES } from './answer.js';
import { createOwnQueries, type OwnQueries } from './own-queries.js';

/** Per exchange (one UDP or TCP round trip to one server). */
const UPSTREAM_TIMEOUT_MS = 2_000;
/**
 * Within a UDP exchange, the query is sent once more after this long without a reply (once within the 2 s timeout).
 * One lost datagram (a cluster's conntrack race, a busy node) would otherwise fail the workload's request; stub
 * resolvers resend too. The same query on the same socket: whichever copy is answered first is taken.
 */
export const UPSTREAM_UDP_RESEND_MS = 1_000;
const MAX_CNAME_HOPS = 8;
const MAX_ADDRESSES = 16;
/** What we advertise upstream in EDNS; larger answers come back with TC and are retried over TCP. */
const UPSTREAM_EDNS_PAYLOAD_BYTES = 1_232;

interface UpstreamServer {
  /** An IP literal: the trusted resolver is never itself looked up by name. */
  readonly host: string;
  readonly port: number;
}

interface UpstreamResolverOptions {
  readonly servers: readonly UpstreamServer[];
  readonly hosts?: HostsTable;
  readonly timeoutMs?: number;
  /** Where each exchange is registered; a new registry without one. */
  readonly ownQueries?: OwnQueries;
}

export interface UpstreamResolver extends Resolver {
  /** Its exchanges in flight: policy DNS fails one that comes back to it (dns/own-queries.ts). */
  readonly ownQueries: OwnQueries;
}

/** A server as the resolver holds it: the address in canonical form. */
type Server = { readonly host: string; readonly port: number; readonly family: 4 | 6 };

type Exchange = { readonly ok: true; readonly packet: DecodedPacket; readonly truncated: boolean } | Failed;
type Failed = { readonly ok: false; readonly failure: ResolveFailure; readonly message: string };

// Worth asking the next server: these say nothing about the name.
const RETRYABLE: ReadonlySet<ResolveFailure> = new Set(['timeout', 'io-failed', 'malformed-response', 'oversized-response']);

export function createUpstreamResolver(options: UpstreamResolverOptions): UpstreamResolver {
  const servers = options.servers.map((s): Server => {
    const ip = parseIp(s.host);
    if (ip === undefined || !Number.isInteger(s.port) || s.port < 1 || s.port > 65_535) {
      throw new BoundaryError('ADDRESS_INVALID', `upstream DNS server ${JSON.stringify(s.host)}:${s.port} must be an IP literal and a port 1-65535`);
    }
    return { host: formatIp(ip), port: s.port, family: ip.family };
  });
  if (servers.length === 0) throw new BoundaryError('ADDRESS_INVALID', 'at least one upstream DNS server is required');
  const timeoutMs = options.timeoutMs ?? UPSTREAM_TIMEOUT_MS;
  const hosts = options.hosts;
  const own = options.ownQueries ?? createOwnQueries();

  async function exchange(name: string, qtype: 'A' | 'AAAA'): Promise<Exchange> {
    let last: Failed = { ok: false, failure: 'io-failed', message: 'no upstream server answered' };
    for (const server of servers) {
      const where = serverAddress(server);
      let reply = await udpExchange(server, name, qtype, timeoutMs, own);
      // TC: the answer did not fit; ask the same server again over TCP and use that reply instead.
      if (reply.ok && reply.truncated) reply = await tcpExchange(server, name, qtype, timeoutMs, own);
      if (reply.ok || !RETRYABLE.has(reply.failure)) return reply;
      last = { ...reply, message: `${where}: ${reply.message}` };
    }
    return last;
  }

  return {
    ownQueries: own,
    async resolve(name, family): Promise<ResolveResult> {
      const fromHosts = hosts?.lookup(name, family) ?? [];
      if (fromHosts.length > 0) return { ok: true, addresses: fromHosts.slice(0, MAX_ADDRESSES), ttlSeconds: HOSTS_TTL_SECONDS };
      try {
        return await followChain(name, family === 4 ? 'A' : 'AAAA', exchange);
      } catch (err) {
        // Defensive: a bug here must surface as a failure value, not a rejected promise in the DNS server.
        return { ok: false, failure: 'io-failed', message: `${name}: ${(err as Error).message}` };
      }
    },
  };
}

async function followChain(
  name: string,
  qtype: 'A' | 'AAAA',
  exchange: (name: string, qtype: 'A' | 'AAAA') => Promise<Exchange>,
): Promise<ResolveResult> {
  let current = name;
  const visited = new Set([name]);
  let hops = 0;
  let minTtl = Number.POSITIVE_INFINITY;
  // Each round queries the name the chain has reached; every round but the first follows at least one CNAME.
  for (let round = 0; round <= MAX_CNAME_HOPS; round++) {
    const reply = await exchange(current, qtype);
    if (!reply.ok) return reply;
    const rcode = (reply.packet.flags ?? 0) & 0x0f;
    if (rcode === 3) return fail('nxdomain', `${current}: upstream says NXDOMAIN`);
    if (rcode !== 0) return fail('error-response', `${current}: upstream answered with RCODE ${rcode}`);
    const answers = reply.packet.answers ?? [];
    let followed = false;
    for (;;) {
      const owned = answers.filter((a) => a.name.toLowerCase() === current);
      const addresses: string[] = [];
      for (const record of owned) {
        if (record.type !== qtype || typeof record.data !== 'string') continue;
        const ip = parseIp(record.data);
        if (ip === undefined || ip.family !== (qtype === 'A' ? 4 : 6)) continue;
        minTtl = Math.min(minTtl, record.ttl ?? 0);
        const text = formatIp(ip);
        if (!addresses.includes(text) && addresses.length < MAX_ADDRESSES) addresses.push(text);
      }
      if (addresses.length > 0) return { ok: true, addresses, ttlSeconds: Number.isFinite(minTtl) ? minTtl : 0 };
      const alias = owned.find((a): a is StringAnswer => a.type === 'CNAME' && typeof a.data === 'string');
      if (alias === undefined) break;
      hops++;
      const target = alias.data.toLowerCase().replace(/\.$/, '');
      if (hops > MAX_CNAME_HOPS) return fail('cname-limit', `${name}: CNAME chain longer than ${MAX_CNAME_HOPS} hops`);
      if (visited.has(target)) return fail('cname-limit', `${name}: CNAME loop at ${target}`);
      visited.add(target);
      minTtl = Math.min(minTtl, alias.ttl ?? 0);
      current = target;
      followed = true;
    }
    if (!followed) return fail('nodata', `${current}: upstream has no ${qtype} records`);
  }
  return fail('cname-limit', `${name}: CNAME chain longer than ${MAX_CNAME_HOPS} hops`);
}

function fail(failure: ResolveFailure, message: string): Failed {
  return { ok: false, failure, message };
}

function buildQuery(id: number, name: string, qtype: 'A' | 'AAAA'): Buffer {
  return encodePacket({
    type: 'query',
    id,
    flags: RECURSION_DESIRED,
    questions: [{ name, type: qtype, class: 'IN' }],
    additionals: [
      { type: 'OPT', name: '.', udpPayloadSize: UPSTREAM_EDNS_PAYLOAD_BYTES, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] },
    ],
  });
}

/** undefined: not the reply to this query (wrong id) — keep waiting. */
function readReply(message: Buffer, id: number, name: string, qtype: 'A' | 'AAAA'): Exchange | undefined {
  if (message.length > MAX_DNS_MESSAGE_BYTES) return fail('oversized-response', `reply of ${message.length} bytes exceeds ${MAX_DNS_MESSAGE_BYTES}`);
  if (message.length >= 2 && message.readUInt16BE(0) !== id) return undefined;
  let packet: DecodedPacket;
  try {
    packet = decodePacket(message);
  } catch (err) {
    return fail('malformed-response', `reply failed to decode: ${(err as Error).message}`);
  }
  const question = packet.questions?.[0];
  if (packet.type !== 'response' || question === undefined || question.name.toLowerCase() !== name || question.type !== qtype) {
    return fail('malformed-response', 'reply does not answer the question that was asked');
  }
  return { ok: true, packet, truncated: packet.flag_tc };
}

function udpExchange(
  server: Server,
  name: string,
  qtype: 'A' | 'AAAA',
  timeoutMs: number,
  own: OwnQueries,
): Promise<Exchange> {
  return new Promise((resolve) => {
    const id = randomInt(0, 65_536);
    // A fresh socket per exchange: a random source port, and connect() makes the kernel drop datagrams
    // from anyone but the server we asked.
    const socket: UdpSocket = createSocket(server.family === 6 ? 'udp6' : 'udp4');
    let done = false;
    let forget: (() => void) | undefined;
    const finish = (result: Exchange) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(resend);
      forget?.();
      socket.removeAllListeners('message');
      socket.on('error', () => {});
      try {
        socket.close();
      } catch {
        // Already closed.
      }
      resolve(result);
    };
    const timer = setTimeout(() => finish(fail('timeout', `no UDP reply within ${timeoutMs} ms`)), timeoutMs);
    let resend: NodeJS.Timeout | undefined;
    socket.on('error', (err) => finish(fail('io-failed', `UDP: ${err.message}`)));
    socket.on('message', (message) => {
      const reply = readReply(message, id, name, qtype);
      if (reply !== undefined) finish(reply);
    });
    // connect() hands its failure (ENETUNREACH offline, EACCES for a broadcast address) to this callback, not to
    // 'error'; a send on the unconnected socket would throw out of the event loop and end the process.
    socket.connect(server.port, server.host, (err?: Error) => {
      if (err) finish(fail('io-failed', `UDP connect: ${err.message}`));
      if (done) return;
      const query = buildQuery(id, name, qtype);
      const port = socket.address().port;
      forget = own.add('udp', port, id, name, () => finish(fail('dns-loop', loopMessage(server, port))));
      const send = (): void => {
        socket.send(query, (err) => err && finish(fail('io-failed', `UDP send: ${err.message}`)));
        resend = setTimeout(send, UPSTREAM_UDP_RESEND_MS);
      };
      send();
    });
  });
}

function serverAddress(server: Server): string {
  return server.family === 6 ? `[${server.host}]:${server.port}` : `${server.host}:${server.port}`;
}

/**
 * Short enough for an event's reason (MAX_REASON_CHARS) with the host before it; the docs say the rest. No `#anchor`:
 * events drop what follows a `#` in a path (telemetry/ocsf.ts cleanText).
 */
function loopMessage(server: Server, port: number): string {
  return `the query to ${serverAddress(server)} from port ${port} came back to boundary's policy DNS: exempt boundary's uid from the DNS redirect (docs/dns.md, A query that comes back)`;
}

function tcpExchange(server: Server, name: string, qtype: 'A' | 'AAAA', timeoutMs: number, own: OwnQueries): Promise<Exchange> {
  return new Promise((resolve) => {
    const id = randomInt(0, 65_536);
    const socket = tcpConnect({ host: server.host, port: server.port });
    const chunks: Buffer[] = [];
    let received = 0;
    let done = false;
    let forget: (() => void) | undefined;
    const finish = (result: Exchange) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      forget?.();
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish(fail('timeout', `no TCP reply within ${timeoutMs} ms`)), timeoutMs);
    socket.on('error', (err) => finish(fail('io-failed', `TCP: ${err.message}`)));
    socket.on('close', () => finish(fail('io-failed', 'TCP connection closed before a full reply')));
    socket.on('connect', () => {
      const port = socket.localPort ?? 0;
      forget = own.add('tcp', port, id, name, () => finish(fail('dns-loop', loopMessage(server, port))));
      const query = buildQuery(id, name, qtype);
      const prefix = Buffer.alloc(2);
      prefix.writeUInt16BE(query.length);
      socket.write(Buffer.concat([prefix, query]));
    });
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
      if (received < 2) return;
      const head = chunks.length === 1 ? chunk : Buffer.concat(chunks);
      const length = head.readUInt16BE(0);
      if (length > MAX_DNS_MESSAGE_BYTES) return finish(fail('oversized-response', `TCP reply of ${length} bytes exceeds ${MAX_DNS_MESSAGE_BYTES}`));
      if (received < 2 + length) return;
      const reply = readReply(Buffer.concat(chunks).subarray(2, 2 + length), id, name, qtype);
      finish(reply ?? fail('malformed-response', 'TCP reply carries another query id'));
    });
  });
}
