// The floors for bench/proxy.sh's forward-HTTP rows: bare node:http forward proxies with no policy, events or
// metrics. Answers absolute-form requests for --allow HOST (relayed to --origin-ip) and 403 for any other host.
//   --upstream node  node:http's keep-alive client upstream: what a plain Node proxy costs
//   --upstream raw   kept-alive sockets, the request written as one string and the answer read by its
//                    Content-Length (the bench origin's answers have one): the least a proxy built on node:http's
//                    server can cost
//
// Usage: node bare-forward.mjs --listen 127.0.0.1:PORT --allow origin.bench.test --origin-ip 127.0.0.1 [--upstream raw]
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

function viaRaw(req, res, url) {
  const port = Number(url.port || 80);
  const pool = idle.get(port) ?? [];
  idle.set(port, pool);
  const socket = pool.pop() ?? dial(port, pool);
  let head = '';
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    if (name.toLowerCase() !== 'proxy-connection') head += `${name}: ${req.rawHeaders[i + 1]}\r\n`;
  }
  socket.write(`${req.method} ${url.pathname}${url.search} HTTP/1.1\r\n${head}\r\n`);
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
    socket.off('close', onError);
    pool.push(socket);
    res.writeHead(status, { 'content-type': type });
    res.end(buffered.subarray(bodyStart, want));
  };
  const onError = () => res.destroy();
  socket.on('data', onData);
  socket.on('close', onError);
}

const relay = arg('--upstream', 'node') === 'raw' ? viaRaw : viaNode;
const server = http.createServer((req, res) => {
  let url;
  try {
    url = new URL(req.url);
  } catch {
    res.writeHead(400).end();
    return;
  }
  if (url.protocol !== 'http:' || url.hostname !== allow) {
    res.writeHead(403).end();
    return;
  }
  relay(req, res, url);
});
const [host, port] = arg('--listen').split(':');
server.keepAliveTimeout = 60_000;
server.listen(Number(port), host);
// A clean exit on the bench's SIGTERM, so --cpu-prof writes its profile.
process.on('SIGTERM', () => process.exit(0));
