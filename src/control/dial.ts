// Dials the supervisor: optional injected name lookup, TCP, TLS 1.3 with the client certificate and
// the supervisor verified against the control CA only, ALPN h2. Turns every failure into a
// ControlFailure with a typed kind. Never speaks HTTP/2 or the control protocol itself.

import { isIP } from 'node:net';
import { BoundaryError } from '../errors.js';
import { createSecureContext, type SecureContext, connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { ControlErrorKind } from './messages.js';

export const CONNECT_TIMEOUT_MS = 10_000;
export const HANDSHAKE_TIMEOUT_MS = 10_000;

/** A failed dial, attach or session, with the kind every NET:FAIL event and /readyz carry. */
export class ControlFailure extends Error {
  override readonly name = 'ControlFailure';
  readonly kind: ControlErrorKind;
  constructor(kind: ControlErrorKind, message: string, options?: ErrorOptions) {
    super(message === '' ? `${kind} failure` : message, options);
    this.kind = kind;
  }
}

export interface ControlTls {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
  /** Name to verify the supervisor's certificate against; defaults to the dialled host. */
  readonly servername?: string;
}

/** What one dial presents: the PEMs and the context built from them (once per version of the material). */
export interface ControlDialTls {
  readonly tls: ControlTls;
  readonly secureContext: SecureContext;
}

/**
 * Asked before every dial. `lastFailure` is the kind of the client's last failure, so a source can re-read its
 * files after a `tls-auth` rejection. It may reject with a ControlFailure (an expired certificate) instead.
 */
export type ControlTlsProvider = (context: { readonly lastFailure: ControlErrorKind | undefined }) => Promise<ControlDialTls>;

/** The same material for every dial; the context is built now, so bad PEMs fail at construction (PKI_INVALID). */
export function fixedControlTls(tls: ControlTls): ControlTlsProvider {
  const material: ControlDialTls = { tls, secureContext: createControlContext(tls) };
  return async function fixedTls() {
    return material;
  };
}

/**
 * Name -> addresses. Injected so tests never query real DNS; main.ts passes the system resolver.
 * `resolvers` names the servers it asks (`10.96.0.10:53`), so a failed lookup says where it asked.
 */
export interface ControlLookup {
  (hostname: string): Promise<readonly string[]>;
  readonly resolvers?: (() => readonly string[]) | undefined;
}

export interface DialOptions {
  readonly host: string;
  readonly port: number;
  readonly tls: ControlTls;
  /** Built once per client (createControlContext): building one costs milliseconds of CPU per dial. */
  readonly secureContext?: SecureContext | undefined;
  readonly lookup?: ControlLookup | undefined;
  readonly connectTimeoutMs?: number | undefined;
  readonly handshakeTimeoutMs?: number | undefined;
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME']);
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);
// Alerts the supervisor sends when it rejects *our* certificate. Under TLS 1.3 they can arrive after
// the client already saw the handshake complete, so they are recognised in any phase.
const PEER_REJECTED_US = /ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|CERTIFICATE_UNKNOWN|UNSUPPORTED_CERTIFICATE|ACCESS_DENIED|DECRYPT_ERROR)/;
const VERIFY_CODES =
  /^(UNABLE_TO_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_TLS_CERT_ALTNAME_INVALID|HOSTNAME_MISMATCH|ERR_SSL_|ERR_TLS_)/;

export type DialPhase = 'dns' | 'connect' | 'tls' | 'session';

/** Classifies any error seen while dialling or during a session. */
export function classifyError(err: unknown, phase: DialPhase): ControlErrorKind {
  if (err instanceof ControlFailure) return err.kind;
  const code = String((err as NodeJS.ErrnoException | undefined)?.code ?? '');
  if (phase === 'dns' || DNS_CODES.has(code)) return 'dns';
  if (PEER_REJECTED_US.test(code)) return 'tls-auth';
  if (code === 'ETIMEDOUT') return phase === 'connect' ? 'connect-timeout' : phase === 'tls' ? 'tls' : 'http2';
  if (UNREACHABLE_CODES.has(code)) return 'connect-refused';
  if (VERIFY_CODES.test(code)) return 'tls';
  if (phase === 'connect') return 'connect-refused';
  if (phase === 'tls') return 'tls';
  return 'http2';
}

/** A readable message for an error: never empty, code first when there is one. */
export function describeError(err: unknown): string {
  if (err === undefined || err === null) return 'unknown error';
  const code = (err as NodeJS.ErrnoException).code;
  const text = err instanceof Error ? err.message : String(err);
  const message = code !== undefined && !text.includes(code) ? `${code}: ${text}` : text;
  return message === '' ? 'unknown error' : message;
}

/** The client's TLS context: only the control CA is trusted, TLS 1.3 only. PKI_INVALID when the PEMs do not load. */
export function createControlContext(tls: ControlTls): SecureContext {
  try {
    return createSecureContext({ ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: 'TLSv1.3' });
  } catch (err) {
    throw new BoundaryError('PKI_INVALID', `control TLS material does not load: ${describeError(err)}`, { cause: err });
  }
}

export async function dialSupervisor(options: DialOptions): Promise<TLSSocket> {
  const { host, port, tls } = options;
  const literal = isIP(host) !== 0;
  let address = host;
  if (!literal && options.lookup !== undefined) {
    const servers = options.lookup.resolvers?.() ?? [];
    const via = servers.length === 0 ? '' : ` via ${servers.join(', ')}`;
    let addresses: readonly string[];
    try {
      addresses = await options.lookup(host);
    } catch (err) {
      // getaddrinfo's message repeats the name; its code alone (ENOTFOUND, EAI_AGAIN) says what happened.
      const code = (err as NodeJS.ErrnoException | undefined)?.code;
      throw new ControlFailure('dns', `cannot resolve ${host}${via}: ${typeof code === 'string' ? code : describeError(err)}`, { cause: err });
    }
    const first = addresses[0];
    if (first === undefined) throw new ControlFailure('dns', `${host} has no addresses${via}`);
    address = first;
  }
  const servername = tls.servername ?? (literal ? undefined : host);
  return new Promise<TLSSocket>((resolve, reject) => {
    let phase: DialPhase = 'connect';
    const socket = tlsConnect({
      host: address,
      port,
      secureContext: options.secureContext ?? createControlContext(tls),
      minVersion: 'TLSv1.3',
      ALPNProtocols: ['h2'],
      // No SNI for an IP literal: node then verifies the certificate's IP SANs against the address.
      ...(servername === undefined || isIP(servername) !== 0 ? {} : { servername }),
    });
    const fail = (kind: ControlErrorKind, message: string, cause?: unknown): void => {
      cleanup();
      socket.destroy();
      reject(new ControlFailure(kind, message, cause === undefined ? undefined : { cause }));
    };
    const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    const handshakeTimeoutMs = options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS;
    let timer = setTimeout(() => fail('connect-timeout', `no TCP connection to ${address}:${port} within ${connectTimeoutMs} ms`), connectTimeoutMs);
    const onConnect = (): void => {
      phase = 'tls';
      clearTimeout(timer);
      timer = setTimeout(() => fail('tls', `TLS handshake with ${host}:${port} did not finish within ${handshakeTimeoutMs} ms`), handshakeTimeoutMs);
    };
    const onError = (err: Error): void => {
      const where = phase === 'connect' ? `connecting to ${address}:${port}` : `TLS handshake with ${host}:${port}`;
      fail(classifyError(err, phase), `${where}: ${describeError(err)}`, err);
    };
    const onClose = (): void => fail(phase === 'connect' ? 'connect-refused' : 'tls', `${host}:${port} closed the connection during the ${phase === 'connect' ? 'TCP connect' : 'TLS handshake'}`);
    const onSecure = (): void => {
      cleanup();
      if (socket.alpnProtocol !== 'h2') {
        socket.destroy();
        reject(new ControlFailure('protocol', `${host}:${port} did not negotiate HTTP/2 (ALPN ${String(socket.alpnProtocol)})`));
        return;
      }
      resolve(socket);
    };
    function cleanup(): void {
      clearTimeout(timer);
      socket.off('connect', onConnect);
      socket.off('error', onError);
      socket.off('close', onClose);
      socket.off('secureConnect', onSecure);
    }
    socket.once('connect', onConnect);
    socket.once('secureConnect', onSecure);
    socket.once('error', onError);
    socket.once('close', onClose);
  });
}
