// Test stand-ins for what SIGTERM must leave behind: silentUpstream(), a trusted upstream DNS that never answers one
// name (so lookups of it wait upstream for the resolver's timeout), and probes that say whether a TCP or UDP
// listener on loopback is still there. Loopback only.

import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { connect } from 'node:net';
import { decode, encode } from 'dns-packet';
import { buildQuery } from './dns-client.js';
import { waiterList, withinDeadline } from './waiters.js';

/** The name silentUpstream() never answers. */
export const SILENT_NAME = 'silent.example.test';

/**
 * The trusted upstream DNS over UDP: `names` answer 127.0.0.1, SILENT_NAME is never answered (so its lookups wait
 * for the resolver's timeout), anything else is NXDOMAIN. silentQueries(n) resolves once n queries for it came.
 */
export async function silentUpstream(names: readonly string[]): Promise<{ port: number; silentQueries(count: number): Promise<unknown>; close(): Promise<void> }> {
  const socket = createSocket('udp4');
  const silent = waiterList<number>();
  let seen = 0;
  socket.on('message', (message, rinfo) => {
    const query = decode(message);
    const question = query.questions?.[0];
    if (question === undefined) return;
    if (question.name === SILENT_NAME) {
      silent.push(++seen);
      return;
    }
    const known = names.includes(question.name) && question.type === 'A';
    const answers = known ? [{ type: 'A' as const, name: question.name, ttl: 30, data: '127.0.0.1' }] : [];
    const rcode = names.includes(question.name) ? 0 : 3;
    socket.send(encode({ type: 'response', id: query.id ?? 0, flags: 0x0180 | rcode, questions: [question], answers }), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    port: socket.address().port,
    silentQueries: (count) => silent.waitFor((n) => n >= count, 5_000, `${count} queries for ${SILENT_NAME} upstream`),
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/** Whether anything still listens on 127.0.0.1 `port`: 'refused' once the listener is gone. */
export async function tcpListener(port: number): Promise<'open' | 'refused'> {
  const socket = connect({ host: '127.0.0.1', port });
  const outcome = await Promise.race([
    once(socket, 'connect').then(() => 'open' as const),
    new Promise<'refused'>((resolve) => socket.once('error', () => resolve('refused'))),
  ]);
  socket.destroy();
  return outcome;
}

/** The same for UDP: a connected socket's send to a closed port fails with ECONNREFUSED (the ICMP answer). */
export async function udpListener(port: number): Promise<'open' | 'refused'> {
  const socket = createSocket('udp4');
  socket.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const refused = new Promise<'refused'>((resolve) => socket.once('error', () => resolve('refused')));
  // A query the server answers (NXDOMAIN or a refusal) proves it listens; a reply of any kind will do.
  const answered = once(socket, 'message').then(() => 'open' as const);
  socket.send(buildQuery('nothing.invalid', 'A', { id: 7 }));
  const outcome = await withinDeadline(Promise.race([refused, answered]), `UDP port ${port} answering or refusing`);
  socket.close();
  return outcome;
}
