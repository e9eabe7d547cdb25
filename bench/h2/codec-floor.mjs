// A third floor for bench/h2.sh: the least an HTTP/2-inspecting proxy in Node does, on the fastest HTTP/2 code Node
// has, boundary's own (the built dist/http2: its server session toward the client, its client toward the origin).
// TLS terminated with the bench's certificate; each stream's head read and checked (readRequestHead), sent to the
// origin over one kept-alive TLS HTTP/2 session, the answer's head read and written back, DATA relayed both ways
// with flow control. Skips all the rest boundary does per stream: no policy, request chain, events, metrics,
// credentials, audit, SNI gate or capture, one upstream session for every client. Answers only what the bench sends
// (GET streams to one origin); a request or answer it cannot relay is reset, never inspected further.
//
// Usage: node bench/h2/codec-floor.mjs --dist <built dist/> --listen host:port --origin host:port --servername NAME
//          --ca ca.pem --cert cert.pem --key key.pem
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { connect, createServer } from 'node:tls';
import { pathToFileURL } from 'node:url';

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
const load = (file) => import(pathToFileURL(`${resolve(arg('--dist'))}/${file}`).href);
const [{ ServerSession }, { createH2Client }, { readRequestHead }, { h2ResponseRegular }, { H2Error }] = await Promise.all([
  load('http2/server-session.js'),
  load('http2/h2-client.js'),
  load('http2/request-head.js'),
  load('http2/headers.js'),
  load('http2/frames.js'),
]);

const ca = readFileSync(arg('--ca'));
const [originHost, originPort] = arg('--origin').split(':');
const servername = arg('--servername');

// One upstream session for every client stream, reopened by the client after GOAWAY or close, as boundary's is.
const upstream = createH2Client({
  connect: () =>
    new Promise((ok, fail) => {
      const socket = connect({ host: originHost, port: Number(originPort), ca, servername, ALPNProtocols: ['h2'] }, () => ok(socket));
      socket.setNoDelay(true);
      socket.once('error', fail);
    }),
});

// One client stream relayed: the upstream call's handler and the client stream's listener in one object.
class Relay {
  constructor(stream, head) {
    this.stream = stream;
    this.head = head;
    this.exchange = undefined;
    this.waiting = false;
    this.done = false;
  }

  start() {
    const { stream, head } = this;
    stream.listener = this;
    const raw = head.rawHeaders;
    let te = false;
    for (let i = 0; i < raw.length; i += 2) if (raw[i] === 'te') te = true;
    const body = stream.remoteEnded ? null : stream;
    // The client's head as read goes up unchanged: its fields were checked by readRequestHead, as boundary's are.
    this.exchange = upstream.request({ method: head.method, target: head.url, headers: raw, body, scheme: 'https', teTrailers: te, checkedFields: raw }, this);
  }

  onHead(status, fields, body, complete) {
    const { stream } = this;
    if (stream.destroyed) {
      this.exchange?.abort(new Error('client closed'));
      return;
    }
    stream.respondHead(status, h2ResponseRegular(fields), complete && body === undefined);
    if (body !== undefined) {
      if (!stream.write(body)) this.pause();
      if (complete) stream.end();
    }
    if (complete) this.done = true;
  }

  onData(chunk) {
    if (!this.stream.destroyed && !this.stream.write(chunk)) this.pause();
  }

  onTrailers() {}

  onEnd() {
    this.done = true;
    if (!this.stream.destroyed) this.stream.end();
  }

  onError() {
    this.done = true;
    if (this.stream.destroyed) return;
    if (this.stream.headersSent) this.stream.reset(H2Error.INTERNAL_ERROR);
    else {
      this.stream.respond([':status', '502', 'content-length', '0'], true);
      this.stream.stopUpload();
    }
  }

  pause() {
    this.exchange?.pause();
    this.waiting = true;
  }

  streamDrained() {
    if (!this.waiting) return;
    this.waiting = false;
    this.exchange?.resume();
  }

  streamClosed() {
    if (!this.done) this.exchange?.abort(new Error('client closed'));
  }

  streamTrailers() {}
}

const server = createServer({ cert: readFileSync(arg('--cert')), key: readFileSync(arg('--key')), ALPNProtocols: ['h2'] }, (socket) => {
  socket.setNoDelay(true);
  new ServerSession(socket, {
    onStream(stream) {
      const read = readRequestHead(stream.fields, 'https', stream.remoteEnded);
      if (!read.ok) {
        stream.reject();
        return;
      }
      stream.contentLength = read.head.contentLength;
      new Relay(stream, read.head).start();
    },
    onFlood: () => undefined,
    onClose: () => undefined,
  });
});
server.on('tlsClientError', () => undefined);
const [host, port] = arg('--listen').split(':');
server.listen(Number(port), host);
// A clean exit on the bench's SIGTERM, so --cpu-prof (FLOOR_NODE_FLAGS) writes its profile.
process.on('SIGTERM', () => process.exit(0));
