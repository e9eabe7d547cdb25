// A minimal DNS client for tests: build queries with dns-packet, send them over UDP or TCP to loopback,
// and decode the replies. Every wait is bounded by a timer that fails the test instead of hanging it.

import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { type DecodedPacket, decode, encode, type RecordClass, type RecordType } from 'dns-packet';

export function buildQuery(name: string, type: RecordType = 'A', options: { id?: number; qclass?: RecordClass; edns?: number; rd?: boolean } = {}): Buffer {
  return encode({
    type: 'query',
    id: options.id ?? 0x1234,
    flags: options.rd === false ? 0 : 0x0100,
    questions: [{ name, type, class: options.qclass ?? 'IN' }],
    additionals:
      options.edns === undefined
        ? []
        : [{ type: 'OPT', name: '.', udpPayloadSize: options.edns, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] }],
  });
}

export function rcodeOf(packet: DecodedPacket): string {
  return (packet as DecodedPacket & { rcode: string }).rcode;
}

/** Sends one datagram and resolves with the first reply, or undefined when none comes within `timeoutMs`. */
export function udpExchange(port: number, message: Buffer, timeoutMs = 2_000): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    const timer = setTimeout(() => done(undefined), timeoutMs);
    function done(value: Buffer | undefined): void {
      clearTimeout(timer);
      socket.close();
      resolve(value);
    }
    socket.on('message', (reply) => done(reply));
    socket.send(message, port, '127.0.0.1');
  });
}

/**
 * Bounds a hang only: how long udpQuery() waits for the reply it requires. A reply that is late on a loaded host is
 * still a reply; one never sent (a dropped query) still fails, only later.
 */
export const UDP_REPLY_HANG_BOUND_MS = 30_000;

export async function udpQuery(port: number, message: Buffer): Promise<DecodedPacket> {
  const reply = await udpExchange(port, message, UDP_REPLY_HANG_BOUND_MS);
  if (reply === undefined) throw new Error('no UDP reply');
  return decode(reply);
}

/** Writes every message length-prefixed on one connection and collects `expect` replies in order. */
export function tcpQueries(port: number, messages: readonly Buffer[], expect = messages.length, timeoutMs = 2_000): Promise<DecodedPacket[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const replies: DecodedPacket[] = [];
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`only ${replies.length} of ${expect} TCP replies`));
    }, timeoutMs);
    socket.on('error', reject);
    socket.on('connect', () => {
      for (const m of messages) {
        const prefix = Buffer.alloc(2);
        prefix.writeUInt16BE(m.length);
        socket.write(Buffer.concat([prefix, m]));
      }
    });
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        replies.push(decode(buffered.subarray(2, 2 + buffered.readUInt16BE(0))));
        buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
      }
      if (replies.length >= expect) {
        clearTimeout(timer);
        socket.end();
        resolve(replies);
      }
    });
  });
}
