// TLS termination inside an inspected CONNECT tunnel: a leaf for the CONNECT host (never the SNI), ALPN h2 and
// http/1.1 (docs/destinations.md#http2), and an SNI that names another host refused with an alert (pin HA-25).
// Never decides policy.

import type { Socket } from 'node:net';
import type { SecureContext } from 'node:tls';
import { TLSSocket } from '../shared/node-tls.js';

/** TLS interception: unusable when the CA failed to load (inspected CONNECTs then get 503). */
export interface Interception {
  ready(): boolean;
  contextFor(host: string): Promise<SecureContext>;
}

const TERMINATION_FAILURES = ['sni-mismatch', 'client-rejected-ca', 'tls-client-closed', 'tls-handshake-failed'] as const;
export type TerminationFailure = (typeof TERMINATION_FAILURES)[number];

/**
 * OpenSSL's codes for the alerts a client sends when it does not trust the leaf we minted: unknown_ca (48),
 * bad_certificate (42), certificate_unknown (46, what Java and some others send). Each means the workload lacks the
 * interception CA, a setup problem with one fix, so it is reported as that instead of as a raw OpenSSL error.
 */
const CA_REJECTION_ALERTS: Readonly<Record<string, string>> = {
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'unknown_ca',
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: 'bad_certificate',
  ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN: 'certificate_unknown',
};

/** What to do about a CA rejection: the workload must trust the bundle boundary writes (docs/tls.md). */
export const CA_BUNDLE_HINT =
  'install the boundary CA bundle in the workload (--ca-bundle-out; point SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS or curl --cacert at it)';

function normaliseSni(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/**
 * Wraps the client socket in a server-side TLSSocket. Resolves once the handshake is done, or with the
 * failure; the socket is destroyed on failure.
 */
export async function terminateTls(
  // The proxy's metrics, typed here by shape: tls/ never imports proxy/.
  ctx: { readonly interception: Interception; readonly metrics?: { now(): number; readonly tlsClientSeconds: { observe(seconds: number): void } } },
  socket: Socket,
  host: string,
): Promise<{ ok: true; socket: TLSSocket } | { ok: false; failure: TerminationFailure; detail: string }> {
  let context: SecureContext;
  try {
    context = await ctx.interception.contextFor(host);
  } catch (err) {
    socket.destroy();
    return { ok: false, failure: 'tls-handshake-failed', detail: `no leaf certificate for ${host}: ${(err as Error).message}` };
  }
  let sniSeen: string | undefined;
  const started = ctx.metrics?.now() ?? 0;
  const tlsSocket = new TLSSocket(socket, {
    isServer: true,
    secureContext: context,
    // The server's order wins: a client offering both gets HTTP/2, one offering neither gets HTTP/1.1.
    ALPNProtocols: ['h2', 'http/1.1'],
    SNICallback(servername, callback) {
      sniSeen = normaliseSni(servername);
      if (sniSeen === host) callback(null, context);
      else callback(new Error('SNI does not name the CONNECT host'));
    },
  });
  return new Promise((resolve) => {
    const fail = (failure: TerminationFailure, detail: string): void => {
      tlsSocket.destroy();
      socket.destroy();
      resolve({ ok: false, failure, detail });
    };
    const onError = (err: Error): void => {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      const alert = CA_REJECTION_ALERTS[code];
      if (code === 'ECONNRESET') fail('tls-client-closed', 'client reset the connection during the TLS handshake');
      else if (sniSeen !== undefined && sniSeen !== host) fail('sni-mismatch', `SNI ${sniSeen} differs from CONNECT host ${host}`);
      else if (alert !== undefined) fail('client-rejected-ca', `the client does not trust the interception CA for ${host} (TLS alert ${alert}): ${CA_BUNDLE_HINT}`);
      else fail('tls-handshake-failed', err.message);
    };
    const onClose = (): void => fail('tls-client-closed', 'client closed during the TLS handshake');
    tlsSocket.once('error', onError);
    tlsSocket.once('close', onClose);
    // The tunnel's socket is half-open (the proxy listener's allowHalfOpen), and so is this one: a client's FIN ends
    // only its reading, and a handshake it can no longer finish would wait for good, the tunnel and its upstream open.
    // A FIN read after the wrap ends the TLS socket; one read before it (with the ClientHello, during the sniff) ends
    // only the wrapped socket, once the wrap has taken the bytes before it.
    tlsSocket.once('end', onClose);
    socket.once('end', onClose);
    tlsSocket.once('secure', () => {
      tlsSocket.removeListener('error', onError);
      tlsSocket.removeListener('close', onClose);
      tlsSocket.removeListener('end', onClose);
      socket.removeListener('end', onClose);
      if (ctx.metrics !== undefined) ctx.metrics.tlsClientSeconds.observe((ctx.metrics.now() - started) / 1000);
      // Until the HTTP server attaches its own handler, an error must not escape as an uncaught event.
      tlsSocket.on('error', () => tlsSocket.destroy());
      // tls.Server clears this once its sockets are secure; on a server socket made by hand it stays set, and
      // node:http2 would wait for a 'secureConnect' that a server socket never emits.
      (tlsSocket as TLSSocket & { secureConnecting: boolean }).secureConnecting = false;
      resolve({ ok: true, socket: tlsSocket });
    });
  });
}
