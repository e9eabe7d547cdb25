// A tiny upstream DNS server on loopback for tests: answers A/AAAA/CNAME from a table over UDP and TCP,
// counts every query, and can misbehave on purpose (TC, silence, garbage, oversized, error RCODEs).

import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import { type Answer, decode, encode, type Packet } from 'dns-packet';

export interface FixtureEntry {
  readonly a?: readonly string[];
  readonly aaaa?: readonly string[];
  /** This name is an alias of `cname`; the fixture adds the target's records to the same reply. */
  readonly cname?: string;
  /** Reply with only the CNAME, so the client has to ask for the target itself. */
  readonly cnameOnly?: boolean;
  readonly ttl?: number;
  readonly rcode?: 'NXDOMAIN' | 'SERVFAIL' | 'REFUSED';
  /** UDP replies carry TC and no answers; TCP replies are complete. */
  readonly truncate?: boolean;
  /** Never reply (the client times out). */
  readonly silent?: boolean;
  /** The first this many UDP queries for the name get no reply (lost datagrams); later ones are answered. */
  readonly dropUdp?: number;
  /** Reply with bytes that do not decode. */
  readonly malformed?: boolean;
  /** Reply with a message larger than 8 KiB. */
  readonly oversized?: boolean;
}

export interface FixtureQuery {
  readonly name: string;
  readonly type: string;
  readonly transport: 'udp' | 'tcp';
}

export interface DnsFixture {
  readonly host: string;
  readonly port: number;
  /** Each question once: a datagram repeating an earlier one (same id, name and type) is counted in `resent` instead. */
  readonly queries: FixtureQuery[];
  count(name?: string): number;
  /** Repeated UDP datagrams (a client resending a query it had no reply to). */
  resent(): number;
  set(name: string, entry: FixtureEntry): void;
  close(): Promise<void>;
}

const RCODE_VALUES = { NXDOMAIN: 3, SERVFAIL: 2, REFUSED: 5 } as const;
const MAX_CHAIN_STEPS = 32;

export async function startDnsFixture(entries: Readonly<Record<string, FixtureEntry>> = {}): Promise<DnsFixture> {
  const table = new Map<string, FixtureEntry>(Object.entries(entries));
  const queries: FixtureQuery[] = [];
  const seenUdp = new Set<string>();
  let resent = 0;
  /** UDP queries for each name that got no reply (FixtureEntry.dropUdp). */
  const dropped = new Map<string, number>();

  function reply(message: Buffer, transport: 'udp' | 'tcp'): Buffer | undefined {
    let query: Packet;
    try {
      query = decode(message);
    } catch {
      return undefined;
    }
    const question = query.questions?.[0];
    if (question === undefined) return undefined;
    const name = question.name.toLowerCase();
    const key = `${query.id}|${name}|${question.type}`;
    if (transport === 'udp' && seenUdp.has(key)) resent++;
    else queries.push({ name, type: question.type, transport });
    if (transport === 'udp') seenUdp.add(key);
    const entry = table.get(name);
    const base = { type: 'response' as const, id: query.id ?? 0, questions: [question] };
    if (entry?.silent) return undefined;
    if (transport === 'udp' && (dropped.get(name) ?? 0) < (entry?.dropUdp ?? 0)) {
      dropped.set(name, (dropped.get(name) ?? 0) + 1);
      return undefined;
    }
    if (entry?.malformed) return Buffer.from([message[0] ?? 0, message[1] ?? 0, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 0xc0]);
    if (entry?.oversized) {
      const answers: Answer[] = [];
      for (let i = 0; i < 700; i++) answers.push({ type: 'A', name, ttl: 30, data: `203.0.${i >> 8}.${i & 0xff}` });
      return encode({ ...base, flags: 0x0180, answers });
    }
    if (entry === undefined) return encode({ ...base, flags: 0x0180 | RCODE_VALUES.NXDOMAIN });
    if (entry.rcode !== undefined) return encode({ ...base, flags: 0x0180 | RCODE_VALUES[entry.rcode] });
    if (entry.truncate && transport === 'udp') return encode({ ...base, flags: 0x0380 });
    const answers: Answer[] = [];
    let current = name;
    let owner: FixtureEntry | undefined = entry;
    for (let step = 0; owner !== undefined && step < MAX_CHAIN_STEPS; step++) {
      const ttl = owner.ttl ?? 30;
      if (owner.cname !== undefined) {
        answers.push({ type: 'CNAME', name: current, ttl, data: owner.cname });
        if (owner.cnameOnly) break;
        current = owner.cname;
        owner = table.get(current);
        continue;
      }
      const list = question.type === 'AAAA' ? owner.aaaa : owner.a;
      for (const ip of list ?? []) answers.push({ type: question.type === 'AAAA' ? 'AAAA' : 'A', name: current, ttl, data: ip });
      break;
    }
    return encode({ ...base, flags: 0x0180, answers });
  }

  let udp: UdpSocket | undefined;
  let tcp: Server | undefined;
  const sockets = new Set<Socket>();
  for (let attempt = 0; attempt < 8 && tcp === undefined; attempt++) {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    const server = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
      let buffered = Buffer.alloc(0);
      s.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
          const message = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
          buffered = buffered.subarray(2 + message.length);
          const out = reply(message, 'tcp');
          if (out === undefined) continue;
          const prefix = Buffer.alloc(2);
          prefix.writeUInt16BE(out.length);
          s.write(Buffer.concat([prefix, out]));
        }
      });
    });
    const ok = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(socket.address().port, '127.0.0.1', () => resolve(true));
    });
    if (!ok) {
      socket.close();
      continue;
    }
    udp = socket;
    tcp = server;
  }
  if (udp === undefined || tcp === undefined) throw new Error('could not bind the DNS fixture on one UDP+TCP port');
  const udpSocket = udp;
  const tcpServer = tcp;
  udpSocket.on('message', (message, rinfo) => {
    const out = reply(message, 'udp');
    if (out !== undefined) udpSocket.send(out, rinfo.port, rinfo.address);
  });
  return {
    host: '127.0.0.1',
    port: udpSocket.address().port,
    queries,
    count: (name) => (name === undefined ? queries.length : queries.filter((q) => q.name === name).length),
    resent: () => resent,
    set: (name, entry) => {
      table.set(name, entry);
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([
        new Promise<void>((resolve) => udpSocket.close(() => resolve())),
        new Promise<void>((resolve) => tcpServer.close(() => resolve())),
      ]);
    },
  };
}
