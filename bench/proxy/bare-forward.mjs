// The floors for bench/proxy.sh's forward-HTTP rows: bare node:http forward proxies with no policy, events or
// metrics. Answers absolute-form requests for --allow HOST (relayed to --origin-ip) and 403 for any other host.
//   --upstream node  node:http's keep-alive client upstream: what a plain Node proxy costs
//   --upstream raw   kept-alive sockets, the request written as one string and the answer read by its
//                    Content-Length (the bench origin's answers have one): the least a proxy built on node:http's
//                    server can cost
//   --server llhttp  no node:http server (no IncomingMessage/ServerResponse): node's llhttp parser (strict, as
//                    node:http sets it) fed by each workload socket, with --upstream raw's upstream, and the answer's
//                    head and body in one write: what a Node proxy costs below node:http's server. It answers only
//                    what the bench sends: absolute-form requests without a body (a body is not forwarded), one
//                    at a time per connection in order; 400 on a parse error or a target that is no URL.
//
// Usage: node bare-forward.mjs --listen 127.0.0.1:PORT --allow origin.bench.test --origin-ip 127.0.0.1
//          [--upstream raw] [--server llhttp]
import { createRequire } from 'node:module';
import http from 'node:http';
import net from 'node:net';

const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const allow = arg('--allow');
const originIp = arg('--origin-ip');
const agent = new http.Agent({ keepAlive: true, maxSockets: 256, noDelay: true });
const idle = new Map();

function viaNode(req, res, url) {
  const headers = { ...req.headers, host: url.host };
  delete headers['proxy-connection'];
  const up = http.request({ agent, host: originIp, port: url.port || 80, method: req.method, path: url.pathname + url.search, headers });
  up.on('response', (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
}

/** A kept-alive socket that leaves the pool when the origin closes it (its keep-alive timeout). */
function dial(port, pool) {
  const socket = net.connect({ host: originIp, port, noDelay: true });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => {
    const at = pool.indexOf(socket);
    if (at >= 0) pool.splice(at, 1);
  });
  return socket;
}

/** Sends one bodiless request upstream on a kept-alive socket; calls done(status, type, body) or failed(). */
function exchange(method, url, rawHeaders, done, failed) {
  const port = Number(url.port || 80);
  const pool = idle.get(port) ?? [];
  idle.set(port, pool);
  const socket = pool.pop() ?? dial(port, pool);
  let head = '';
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    if (name.toLowerCase() !== 'proxy-connection') head += `${name}: ${rawHeaders[i + 1]}\r\n`;
  }
  socket.write(`${method} ${url.pathname}${url.search} HTTP/1.1\r\n${head}\r\n`);
  let buffered = Buffer.alloc(0);
  let want = -1;
  let bodyStart = 0;
  let status = 0;
  let type = 'text/plain';
  const onData = (chunk) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    if (want < 0) {
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const text = buffered.toString('latin1', 0, end);
      status = Number(text.slice(9, 12));
      type = /\r\ncontent-type:\s*([^\r]*)/i.exec(text)?.[1] ?? type;
      bodyStart = end + 4;
      want = bodyStart + Number(/\r\ncontent-length:\s*(\d+)/i.exec(text)[1]);
    }
    if (buffered.length < want) return;
    socket.off('data', onData);
    socket.off('close', failed);
    pool.push(socket);
    done(status, type, buffered.subarray(bodyStart, want));
  };
  socket.on('data', onData);
  socket.on('close', failed);
}

function viaRaw(req, res, url) {
  exchange(
    req.method,
    url,
    req.rawHeaders,
    (status, type, body) => {
      // With its length, as boundary answers: without it node:http would frame the body in chunks.
      res.writeHead(status, { 'content-type': type, 'content-length': body.length });
      res.end(body);
    },
    () => res.destroy(),
  );
}

/** The target of an absolute-form request for the allowed host, or the status that refuses it. */
function target(raw) {
  let url;
  try {
    url = new URL(raw);
  } catch {
    return 400;
  }
  return url.protocol !== 'http:' || url.hostname !== allow ? 403 : url;
}

function nodeServer() {
  const relay = arg('--upstream', 'node') === 'raw' ? viaRaw : viaNode;
  const server = http.createServer((req, res) => {
    const url = target(req.url);
    if (typeof url === 'number') res.writeHead(url).end();
    else relay(req, res, url);
  });
  server.keepAliveTimeout = 60_000;
  return server;
}

const { HTTPParser, methods } = createRequire(import.meta.url)('_http_common');
const REASONS = { 200: 'OK', 400: 'Bad Request', 403: 'Forbidden' };
const answerText = (status, type, length, connection = 'keep-alive') =>
  `HTTP/1.1 ${status} ${REASONS[status] ?? 'Unknown'}\r\ncontent-type: ${type}\r\ncontent-length: ${length}\r\nconnection: ${connection}\r\n\r\n`;

/** One workload connection read by llhttp; answers leave in request order, head and body in one write. */
function onLlhttpConnection(socket) {
  socket.setNoDelay(true);
  const parser = new HTTPParser();
  parser.initialize(HTTPParser.REQUEST, {}, 0, HTTPParser.kLenientNone);
  const queue = [];
  const flush = () => {
    while (queue.length > 0 && queue[0].out !== undefined) {
      const { out } = queue.shift();
      if (out === null) {
        socket.destroy();
        return;
      }
      socket.write(out);
    }
  };
  const answer = (slot, status, type, body) => {
    slot.out = Buffer.concat([Buffer.from(answerText(status, type, body.length), 'latin1'), body]);
    flush();
  };
  // Headers split over several reads arrive through kOnHeaders before kOnHeadersComplete.
  let partial = [];
  let partialUrl = '';
  parser[HTTPParser.kOnHeaders] = (headers, url) => {
    partial = partial.concat(headers);
    partialUrl += url;
  };
  parser[HTTPParser.kOnHeadersComplete] = (_major, _minor, headers, method, url) => {
    const rawHeaders = headers ?? partial;
    const rawUrl = url ?? partialUrl;
    partial = [];
    partialUrl = '';
    const slot = { out: undefined };
    queue.push(slot);
    const dest = target(rawUrl);
    if (typeof dest === 'number') answer(slot, dest, 'text/plain', Buffer.alloc(0));
    else
      exchange(
        methods[method],
        dest,
        rawHeaders,
        (status, type, body) => answer(slot, status, type, body),
        () => {
          slot.out = null;
          flush();
        },
      );
    return 0;
  };
  const onResult = (ret) => {
    if (ret instanceof Error) socket.end(answerText(400, 'text/plain', 0, 'close'));
  };
  parser[HTTPParser.kOnExecute] = onResult;
  // As node:http does: llhttp reads the socket's handle itself, without a 'data' event per read.
  const consumed = socket._handle?.isStreamBase === true;
  if (consumed) parser.consume(socket._handle);
  else socket.on('data', (chunk) => onResult(parser.execute(chunk)));
  socket.on('error', () => socket.destroy());
  socket.on('close', () => {
    if (consumed) parser.unconsume();
    parser.free();
  });
}

const server = arg('--server', 'node') === 'llhttp' ? net.createServer(onLlhttpConnection) : nodeServer();
const [host, port] = arg('--listen').split(':');
server.listen(Number(port), host);
// A clean exit on the bench's SIGTERM, so --cpu-prof writes its profile.
process.on('SIGTERM', () => process.exit(0));
