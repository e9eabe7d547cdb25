// The floor of bench/bulk.sh: a CONNECT proxy in bare Node with no policy, events, metrics or timeouts: parse the
// CONNECT line, dial, answer 200, pipe both ways. What any Node relay pays for the bytes alone. Loopback only.
// Usage: node bare-tunnel.mjs --listen PORT --hosts FILE   (names resolve through FILE only)

import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
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
    const upstream = connect(Number(port), address, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      const rest = head.subarray(end + 4);
      if (rest.length > 0) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  };
  client.on('data', onData);
}).listen(Number(arg('--listen')), '127.0.0.1');
