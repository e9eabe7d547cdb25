// A second floor for bench/h2.sh: a Node TLS relay that terminates the client's TLS and re-encrypts the bytes to
// the origin over a TLS connection of its own, one per client connection, without reading a single HTTP/2 frame.
// What any TLS-intercepting proxy in Node pays before it parses anything: the least such a proxy can cost.
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:tls';

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
const ca = readFileSync(arg('--ca'));
const [originHost, originPort] = arg('--origin').split(':');
const server = createServer({ cert: readFileSync(arg('--cert')), key: readFileSync(arg('--key')), ALPNProtocols: ['h2'] }, (client) => {
  const upstream = connect({ host: originHost, port: Number(originPort), ca, servername: arg('--servername'), ALPNProtocols: ['h2'] });
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream).pipe(client);
  const end = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', end).on('close', end);
  upstream.on('error', end).on('close', end);
});
const [host, port] = arg('--listen').split(':');
server.listen(Number(port), host);
// A clean exit on the bench's SIGTERM, so --cpu-prof writes its profile.
process.on('SIGTERM', () => process.exit(0));
