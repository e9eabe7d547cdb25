// A DNS client for load: one UDP socket on loopback, many queries in flight matched by id, each wait bounded by a
// timer. For floods, where a socket per query (dns-client.ts udpExchange) would cost more than the server.

import { createSocket } from 'node:dgram';
import { decode } from 'dns-packet';
import { buildQuery, rcodeOf } from './dns-client.js';

/** The RCODE, the first answer's data and TTL (empty and 0 without one). */
export interface DnsReply {
  readonly rcode: string;
  readonly ip: string;
  readonly ttl: number;
}

/** One UDP socket for many queries, matched by id; a query with no reply within `timeoutMs` gets rcode 'TIMEOUT'. */
export function dnsClient(port: number) {
  const socket = createSocket('udp4');
  const pending = new Map<number, (reply: DnsReply) => void>();
  let next = 0;
  socket.on('message', (message) => {
    const reply = decode(message);
    const answer = reply.answers?.[0] as { data?: unknown; ttl?: number } | undefined;
    pending.get(reply.id ?? -1)?.({ rcode: rcodeOf(reply), ip: String(answer?.data ?? ''), ttl: answer?.ttl ?? 0 });
    pending.delete(reply.id ?? -1);
  });
  return {
    ask(name: string, timeoutMs = 2_000): Promise<DnsReply> {
      const id = next++ & 0xffff;
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          resolve({ rcode: 'TIMEOUT', ip: '', ttl: 0 });
        }, timeoutMs);
        pending.set(id, (reply) => {
          clearTimeout(timer);
          resolve(reply);
        });
        socket.send(buildQuery(name, 'A', { id }), port, '127.0.0.1');
      });
    },
    close: () => socket.close(),
  };
}
