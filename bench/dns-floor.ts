// The Node floor for bench/dns.sh: a UDP responder that does no DNS work (copy the query, append one A answer,
// send). What a Node DNS server cannot go below on one core; boundary's rows are read against it.
// Usage: node bench/dns-floor.mjs <port> [receive-buffer-bytes] [send-buffer-bytes] [burst|each] (0: the kernel's
// default). `burst` (the default) holds the answers of one loop turn and sends them after it, as src/dns/udp-replies.ts
// does; `each` sends every answer as it is made. Prints "ready <port>"; loopback only; stops on SIGTERM/SIGINT.

import { createSocket, type Socket } from 'node:dgram';
import { createUdpReplies } from '../src/dns/udp-replies.js';

const port = Number(process.argv[2] ?? '15354');
/** The same receive buffer as src/dns/server.ts by default, so both see the same kernel queue. */
const RECEIVE_BUFFER_BYTES = 4 * 1_048_576;
const receiveBuffer = Number(process.argv[3] ?? RECEIVE_BUFFER_BYTES);
const sendBuffer = Number(process.argv[4] ?? '0');
const sendMode = process.argv[5] ?? 'burst';
if (sendMode !== 'burst' && sendMode !== 'each') throw new Error('send mode: burst or each');
// Name pointer to the question (0xc00c), type A, class IN, TTL 30, RDLENGTH 4, 198.18.0.1.
const ANSWER = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 198, 18, 0, 1]);

let answered = 0;
const replies = createUdpReplies((err) => {
  throw err;
});
function serve(socket: Socket, message: Buffer, rinfo: { port: number; address: string }): void {
  if (message.length < 12) return;
  const out = Buffer.allocUnsafe(message.length + ANSWER.length);
  message.copy(out);
  ANSWER.copy(out, message.length);
  out[2] = (out[2] as number) | 0x80; // QR
  out[3] = 0x80; // RA, NOERROR
  out.writeUInt16BE(1, 6); // ANCOUNT
  // dnsperf sends no EDNS without -e: the question is the whole message, and the answer goes right after it.
  if (sendMode === 'each') socket.send(out, rinfo.port, rinfo.address);
  else replies.send(socket, out, rinfo.port, rinfo.address);
  answered++;
}

const socket = createSocket({
  type: 'udp4',
  ...(receiveBuffer > 0 ? { recvBufferSize: receiveBuffer } : {}),
  ...(sendBuffer > 0 ? { sendBufferSize: sendBuffer } : {}),
  lookup: (address, _options, callback) => callback(null, address, 4),
});
socket.on('message', (message, rinfo) => serve(socket, message, rinfo));
await new Promise<void>((resolve) => socket.bind({ port, address: '127.0.0.1', exclusive: true }, resolve));
process.stdout.write(`ready ${socket.address().port}\n`);

function stop(): void {
  process.stderr.write(`answered=${answered}\n`);
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
