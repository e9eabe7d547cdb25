// The floor of bench/bulk.sh: a CONNECT proxy in bare Node with no policy, events, metrics or timeouts: parse the
// CONNECT line, dial, answer 200, pipe both ways. What any Node relay pays for the bytes alone. Loopback only.
// Usage: node bare-tunnel.mjs --listen PORT --hosts FILE [--onread BYTES [--onread-copy]]   (names resolve through FILE only)
//   --onread BYTES: the upstream socket reads into one reused buffer of BYTES (net's `onread` option) and each chunk
//   is written to the client before the next read, instead of a new buffer per read piped through streams;
//   --onread-copy: each chunk is copied into a buffer of its own and written (no wait before the next read).

import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const arg = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const onreadBytes = Number(arg('--onread') ?? 0);
const onreadCopy = process.argv.includes('--onread-copy');
const hosts = new Map(
  readFileSync(arg('--hosts'), 'utf8')
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 2)
    .map(([ip, name]) => [name, ip]),
);

createServer((client) => {
  let head = Buffer.alloc(0);
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    client.off('data', onData);
    client.pause();
    const [, authority] = /^CONNECT (\S+) HTTP\/1\.1\r\n/.exec(head.toString('latin1')) ?? [];
    const [host, port] = (authority ?? '').split(':');
    const address = hosts.get(host);
    if (address === undefined) return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
    const options = { port: Number(port), host: address };
    if (onreadBytes > 0) {
      const buffer = Buffer.allocUnsafe(onreadBytes);
      options.onread = {
        buffer,
        callback: onreadCopy
          ? (n) => {
              const chunk = Buffer.allocUnsafe(n);
              buffer.copy(chunk, 0, 0, n);
              if (client.write(chunk)) return true;
              client.once('drain', () => upstream.resume());
              return false;
            }
          : (n) => {
              // The buffer is read into again only once the client has taken this chunk.
              client.write(buffer.subarray(0, n), () => upstream.resume());
              return false;
            },
      };
    }
    const upstream = connect(options, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      const rest = head.subarray(end + 4);
      if (rest.length > 0) upstream.write(rest);
      client.pipe(upstream);
      if (onreadBytes > 0) upstream.on('end', () => client.end());
      else upstream.pipe(client);
      client.resume();
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  };
  client.on('data', onData);
}).listen(Number(arg('--listen')), '127.0.0.1');
