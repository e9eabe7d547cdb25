// The bench's TLS HTTP/2 origin: answers every request with 200 and a fixed 64-byte body. Writes its port to --ready.
import { writeFileSync, readFileSync } from 'node:fs';
import { createSecureServer } from 'node:http2';

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
const body = Buffer.alloc(64, 'x');
const server = createSecureServer({ cert: readFileSync(arg('--cert')), key: readFileSync(arg('--key')), ALPNProtocols: ['h2'] });
server.on('stream', (stream) => {
  stream.on('error', () => {});
  stream.respond({ ':status': 200, 'content-type': 'text/plain', 'content-length': body.length });
  stream.end(body);
});
server.on('sessionError', () => {});
server.listen(0, '127.0.0.1', () => writeFileSync(arg('--ready'), JSON.stringify({ port: server.address().port })));
