// Origin for bench/memory.sh, in its own process so its sockets never count against boundary's RSS: a TCP
// listener that accepts and holds (tunnel target), an HTTPS keep-alive server (inspected target) and a UDP
// DNS upstream that answers every A query with 127.0.0.1. Loopback only.
//
// Usage: node origin.mjs --cert PEM --key PEM   prints {"tcp":p,"https":p,"dns":p} on stdout once listening.

import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import dnsPacket from 'dns-packet';

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
const BODY = Buffer.from('ok\n');
// Longer than any phase of the bench: the origin must never be the side that closes an idle connection.
const IDLE_MS = 600_000;

const held = new Set();
const tcp = net.createServer((socket) => {
  held.add(socket);
  socket.on('error', () => {});
  socket.on('close', () => held.delete(socket));
});
const tls = https.createServer({ cert: readFileSync(arg('--cert')), key: readFileSync(arg('--key')) }, (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(BODY.length) });
  res.end(BODY);
});
tls.keepAliveTimeout = IDLE_MS;
tls.headersTimeout = IDLE_MS + 1_000;
tls.requestTimeout = 0;
const dns = createSocket('udp4');
dns.on('message', (msg, rinfo) => {
  let q;
  try {
    q = dnsPacket.decode(msg);
  } catch {
    return;
  }
  const question = q.questions?.[0];
  const answers = question?.type === 'A' ? [{ type: 'A', name: question.name, ttl: 30, data: '127.0.0.1' }] : [];
  const reply = dnsPacket.encode({ id: q.id, type: 'response', flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE, questions: q.questions, answers });
  dns.send(reply, rinfo.port, rinfo.address);
});

const listen = (server) => new Promise((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => resolve(server.address().port)));
const [tcpPort, httpsPort] = await Promise.all([listen(tcp), listen(tls)]);
await new Promise((resolve) => dns.bind(0, '127.0.0.1', resolve));
process.stdout.write(`${JSON.stringify({ tcp: tcpPort, https: httpsPort, dns: dns.address().port })}\n`);
process.on('SIGTERM', () => process.exit(0));
