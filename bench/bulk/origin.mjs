// Origin of bench/bulk.sh: answers GET /bulk/<bytes> with that many bytes over plain HTTP/1.1, written from one
// 1 MiB buffer with backpressure, so the origin is never what limits the download. Loopback only.
// Usage: node origin.mjs --ready FILE   (writes {"port":N} to FILE once listening)

import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';

const CHUNK = Buffer.alloc(1024 * 1024, 'boundary bulk bench ');
const ready = process.argv[process.argv.indexOf('--ready') + 1];

const server = createServer((req, res) => {
  const match = /^\/bulk\/(\d+)$/.exec(req.url ?? '');
  if (req.method !== 'GET' || match === null) {
    res.writeHead(404).end();
    return;
  }
  let left = Number(match[1]);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) });
  const more = () => {
    while (left > 0) {
      const piece = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
      left -= piece.length;
      if (!res.write(piece)) return void res.once('drain', more);
    }
    res.end();
  };
  more();
});
server.listen(0, '127.0.0.1', () => writeFileSync(ready, JSON.stringify({ port: server.address().port })));
