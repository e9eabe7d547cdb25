// An HTTP/1.1 + HTTP/2 TLS origin that asks every client for a certificate and answers with its subject CN: with
// `require` it refuses connections without one from `clientCa`, without it it records what each connection offered.

import { once } from 'node:events';
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';

export interface MtlsOrigin {
  readonly port: number;
  /** The subject CN of the certificate each TLS connection presented; '' for none. */
  readonly peers: string[];
  close(): Promise<void>;
}

export async function mtlsOrigin(options: { serverCa: CertificateAuthority; clientCa: CertificateAuthority; names: readonly string[]; require: boolean }): Promise<MtlsOrigin> {
  const cert = await issueCertificate({ ca: options.serverCa, kind: 'server', names: options.names, now: Date.now });
  const peers: string[] = [];
  const server: Http2SecureServer = createSecureServer(
    { cert: cert.certPem, key: cert.keyPem, ca: options.clientCa.certPem, allowHTTP1: true, requestCert: true, rejectUnauthorized: options.require },
    (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ subject: String(peer.subject?.CN ?? ''), version: req.httpVersion }));
    },
  );
  server.on('secureConnection', (socket: TLSSocket) => peers.push(String(socket.getPeerCertificate().subject?.CN ?? '')));
  // A refused handshake is the point of some cases: nothing to report.
  server.on('tlsClientError', () => undefined);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    peers,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}
