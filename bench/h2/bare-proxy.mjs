// The floor for bench/h2.sh: a bare node:http2 TLS proxy with no policy, events or metrics (what node:http2 alone
// costs on both sides). Serves --cert/--key on --listen, relays every stream to --origin over one HTTP/2 session.
import { readFileSync } from 'node:fs';
import { connect, createSecureServer } from 'node:http2';

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
const ca = readFileSync(arg('--ca'));
let upstream;
// One session, reopened when the origin closes it (as boundary's client does).
function session() {
  if (upstream === undefined || upstream.closed || upstream.destroyed) {
    upstream = connect(arg('--origin'), { ca, servername: arg('--servername') });
    upstream.on('error', () => {});
  }
  return upstream;
}
const server = createSecureServer({ cert: readFileSync(arg('--cert')), key: readFileSync(arg('--key')), ALPNProtocols: ['h2'] });
server.on('stream', (stream, headers) => {
  stream.on('error', () => {});
  const req = session().request({ ':method': headers[':method'], ':path': headers[':path'], ':authority': headers[':authority'] }, { endStream: true });
  req.on('error', () => stream.close());
  stream.on('close', () => req.close());
  req.on('response', (h) => {
    stream.respond({ ':status': h[':status'], 'content-type': h['content-type'] });
    req.pipe(stream);
  });
});
const [host, port] = arg('--listen').split(':');
server.on('sessionError', () => {});
server.listen(Number(port), host);
// A clean exit on the bench's SIGTERM, so --cpu-prof (FLOOR_NODE_FLAGS) writes its profile.
process.on('SIGTERM', () => process.exit(0));
