// TLS termination inside an inspected CONNECT tunnel: a leaf for the CONNECT host (never the SNI), ALPN
// http/1.1 only, and an SNI that names another host refused with an alert (pin HA-25). Never decides policy.

import type { Socket } from 'node:net';
import { type SecureContext, TLSSocket } from 'node:tls';

/** TLS interception: unusable when the CA failed to load (inspected CONNECTs then get 503). */
export interface Interception {
  ready(): boolean;
  contextFor(host: string): Promise<SecureContext>;
}

const TERMINATION_FAILURES = ['sni-mismatch', 'tls-handshake-failed'] as const;
type TerminationFailure = (typeof TERMINATION_FAILURES)[number];

function normaliseSni(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/**
 * Wraps the client socket in a server-side TLSSocket. Resolves once the handshake is done, or with the
 * failure; the socket is destroyed on failure.
 */
export async function terminateTls(
  ctx: { readonly interception: Interception },
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
  const tlsSocket = new TLSSocket(socket, {
    isServer: true,
    secureContext: context,
    ALPNProtocols: ['http/1.1'],
    SNICallback(servername, callback) {
      sniSeen = normaliseSni(servername);
      if (sniSeen === host) callback(null, context);
      else callback(new Error('SNI does not name the CONNECT host'));
    },
  });
  return new Promise((resolve) => {
    const onError = (err: Error): void => {
      tlsSocket.destroy();
      socket.destroy();
      if (sniSeen !== undefined && sniSeen !== host) {
        resolve({ ok: false, failure: 'sni-mismatch', detail: `SNI ${sniSeen} differs from CONNECT host ${host}` });
      } else {
        resolve({ ok: false, failure: 'tls-handshake-failed', detail: err.message });
      }
    };
    const onClose = (): void => onError(new Error('client closed during the TLS handshake'));
    tlsSocket.once('error', onError);
    tlsSocket.once('close', onClose);
    tlsSocket.once('secure', () => {
      tlsSocket.removeListener('error', onError);
      tlsSocket.removeListener('close', onClose);
      // Until the HTTP server attaches its own handler, an error must not escape as an uncaught event.
      tlsSocket.on('error', () => tlsSocket.destroy());
      resolve({ ok: true, socket: tlsSocket });
    });
  });
}
