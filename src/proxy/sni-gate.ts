// A raw relay that holds the client's first bytes until it is known whether they are a TLS ClientHello,
// and refuses one whose SNI names another host than the connection was authorised for (HA-27: the SNI
// never picks the destination). Server-first protocols keep working: upstream bytes flow meanwhile.

import type { Socket } from 'node:net';
import { MAX_CLIENT_HELLO_BYTES, readClientHello } from '../tls/client-hello.js';
import { relayRaw } from './tunnel.js';

/** relayRaw's shape: what connect.ts's startTunnel runs for an uninspected route. */
export type RawRelay = (client: Socket, upstream: Socket, idleTimeoutMs: number, onClosed: () => void) => void;

/** Why the first client bytes may not pass to `host`, or undefined when they may. Pure. */
export function sniProblem(first: Buffer, host: string): string | undefined {
  const hello = readClientHello(first);
  if (hello.kind === 'not-tls') return undefined;
  if (hello.kind === 'more') return `TLS ClientHello longer than ${MAX_CLIENT_HELLO_BYTES} bytes`;
  if (hello.kind === 'malformed') return `malformed TLS ClientHello: ${hello.why}`;
  if (hello.sni === undefined || hello.sni === host) return undefined;
  return `SNI ${hello.sni} differs from the mapped name ${host}`;
}

export function sniGatedRelay(host: string, onRefused: (detail: string) => void): RawRelay {
  return function relaySniChecked(client, upstream, idleTimeoutMs, onClosed) {
    let buffered: Buffer = Buffer.alloc(0);
    let settled = false;
    const forward = (chunk: Buffer): void => {
      if (!client.write(chunk)) upstream.pause();
    };
    const onDrain = (): void => {
      upstream.resume();
    };
    const detach = (): void => {
      settled = true;
      client.removeListener('data', onData);
      client.removeListener('drain', onDrain);
      client.removeListener('close', abort);
      client.removeListener('timeout', abort);
      upstream.removeListener('data', forward);
      upstream.removeListener('close', abort);
      upstream.removeListener('end', onUpstreamEnd);
    };
    function abort(): void {
      if (settled) return;
      detach();
      client.destroy();
      upstream.destroy();
      onClosed();
    }
    function onUpstreamEnd(): void {
      if (settled) return;
      // The server is done before the client said anything: deliver what it sent, then let both go.
      detach();
      upstream.destroy();
      client.end();
      onClosed();
    }
    function onData(chunk: Buffer): void {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      if (readClientHello(buffered).kind === 'more' && buffered.length < MAX_CLIENT_HELLO_BYTES) return;
      detach();
      client.pause();
      upstream.pause();
      const problem = sniProblem(buffered, host);
      if (problem !== undefined) {
        onRefused(problem);
        client.destroy();
        upstream.destroy();
        onClosed();
        return;
      }
      client.unshift(buffered);
      relayRaw(client, upstream, idleTimeoutMs, onClosed);
    }
    client.setTimeout(idleTimeoutMs);
    client.on('timeout', abort);
    client.once('close', abort);
    upstream.once('close', abort);
    upstream.once('end', onUpstreamEnd);
    client.on('drain', onDrain);
    client.on('data', onData);
    upstream.on('data', forward);
    client.resume();
  };
}
