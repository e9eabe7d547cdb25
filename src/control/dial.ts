// Dials the supervisor: optional injected name lookup, TCP, TLS 1.3 with the client certificate and
// the supervisor verified against the control CA only, ALPN h2. Turns every failure into a
// ControlFailure with a typed kind. Never speaks HTTP/2 or the control protocol itself.

import { isIP } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import type { PeerCertificate, SecureContext } from 'node:tls';
import { checkServerIdentity, createSecureContext, TLSSocket, connect as tlsConnect } from '../shared/node-tls.js';
import { type CertificateSummary, certificateText, summarisePeerCertificate, summariseRendered } from '../pki/certificate-summary.js';
import type { ControlErrorKind } from './messages.js';
import { describeError } from './protocol.js';

export const CONNECT_TIMEOUT_MS = 10_000;
const HANDSHAKE_TIMEOUT_MS = 10_000;
/**
 * Connect timeout for every address but the last when a name resolves to several: a cluster network connects in
 * milliseconds, and 3 s still covers one lost SYN (Linux retransmits after its 1 s initial RTO) on a loaded node.
 * A replica whose address is black-holed then costs the next dial 3 s, not CONNECT_TIMEOUT_MS.
 */
const NEXT_ADDRESS_CONNECT_TIMEOUT_MS = 3_000;
/** Addresses tried per dial: a headless Service can list many replicas, and each may cost a connect timeout. */
const MAX_DIAL_ADDRESSES = 8;
/** Failures that say nothing about the next replica: the one dialled did not take the connection. */
const NEXT_ADDRESS_KINDS: ReadonlySet<ControlErrorKind> = new Set(['connect-refused', 'connect-timeout']);

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

interface DialOptions {
  readonly host: string;
  readonly port: number;
  readonly tls: ControlTls;
  /** Built once per client (createControlContext): building one costs milliseconds of CPU per dial. */
  readonly secureContext?: SecureContext | undefined;
  readonly lookup?: ControlLookup | undefined;
  readonly connectTimeoutMs?: number | undefined;
  readonly handshakeTimeoutMs?: number | undefined;
  /** Picks the first address to try when the name has several; defaults to Math.random. */
  readonly random?: (() => number) | undefined;
  /**
   * Aborted when the control client closes: the lookup, connect and handshake end at once instead of at their
   * timeouts (up to CONNECT_TIMEOUT_MS + HANDSHAKE_TIMEOUT_MS), which outlast the drain deadline (issue 15).
   */
  readonly signal?: AbortSignal | undefined;
  /** Told the verified supervisor certificate of a dial that succeeds (the attach line names it). */
  readonly onPeerCertificate?: ((certificate: CertificateSummary) => void) | undefined;
}

/** What a dial ends with once `signal` aborts. Never published: the client loop stops on close. */
function abandoned(target: string): ControlFailure {
  return new ControlFailure('connect-refused', `dial of ${target} abandoned: the control client is closing`);
}

/** `promise`, or a rejection with abandoned(target) as soon as `signal` aborts. */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, target: string): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(abandoned(target));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abandoned(target));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME']);
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);
// Alerts the supervisor sends when it rejects *our* certificate. Under TLS 1.3 they can arrive after
// the client already saw the handshake complete, so they are recognised in any phase.
const PEER_REJECTED_US = /ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|CERTIFICATE_UNKNOWN|UNSUPPORTED_CERTIFICATE|ACCESS_DENIED|DECRYPT_ERROR)/;
const VERIFY_CODES =
  /^(UNABLE_TO_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_TLS_CERT_ALTNAME_INVALID|HOSTNAME_MISMATCH|ERR_SSL_|ERR_TLS_)/;

type DialPhase = 'dns' | 'connect' | 'tls' | 'session';

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

/** The client's TLS context: only the control CA is trusted, TLS 1.3 only. PKI_INVALID when the PEMs do not load. */
export function createControlContext(tls: ControlTls): SecureContext {
  try {
    return createSecureContext({ ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, minVersion: 'TLSv1.3' });
  } catch (err) {
    throw new BoundaryError('PKI_INVALID', `control TLS material does not load: ${describeError(err)}`, { cause: err });
  }
}

/**
 * Resolves `host` (when a lookup is given and it is not an IP literal) and dials its addresses in turn, starting at a
 * random one so a fleet spreads over the replicas behind one name. Only a connect-phase failure (refused,
 * unreachable, connect timeout) moves on to the next address: a TLS or tls-auth failure would be the same at every
 * replica, so it is reported at once. The certificate is always checked against the dialled name, never an address.
 */
export async function dialSupervisor(options: DialOptions): Promise<TLSSocket> {
  const { host, port } = options;
  const addresses = await resolveAddresses(options);
  const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
  const first = Math.floor((options.random ?? Math.random)() * addresses.length) % addresses.length;
  const tried: ControlFailure[] = [];
  for (let i = 0; i < addresses.length; i += 1) {
    const address = addresses[(first + i) % addresses.length] ?? host;
    const last = i === addresses.length - 1;
    try {
      // A black-holed replica must not hold up the live ones for the full timeout; the last address gets all of it.
      return await dialAddress(options, address, last ? connectTimeoutMs : Math.min(connectTimeoutMs, NEXT_ADDRESS_CONNECT_TIMEOUT_MS));
    } catch (err) {
      if (!(err instanceof ControlFailure) || !NEXT_ADDRESS_KINDS.has(err.kind)) throw err;
      if (addresses.length === 1) throw err;
      tried.push(err);
    }
  }
  const kind: ControlErrorKind = tried.every((f) => f.kind === 'connect-timeout') ? 'connect-timeout' : 'connect-refused';
  throw new ControlFailure(kind, `no address of ${host}:${port} accepted a connection (tried ${tried.length}): ${tried.map((f) => f.message).join('; ')}`, {
    cause: tried[tried.length - 1],
  });
}

async function resolveAddresses(options: DialOptions): Promise<readonly string[]> {
  const { host } = options;
  if (isIP(host) !== 0 || options.lookup === undefined) return [host];
  const servers = options.lookup.resolvers?.() ?? [];
  const via = servers.length === 0 ? '' : ` via ${servers.join(', ')}`;
  let addresses: readonly string[];
  try {
    addresses = await unlessAborted(options.lookup(host), options.signal, host);
  } catch (err) {
    if (options.signal?.aborted === true) throw abandoned(host);
    // getaddrinfo's message repeats the name; its code alone (ENOTFOUND, EAI_AGAIN) says what happened.
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    throw new ControlFailure('dns', `cannot resolve ${host}${via}: ${typeof code === 'string' ? code : describeError(err)}`, { cause: err });
  }
  const unique = [...new Set(addresses)].slice(0, MAX_DIAL_ADDRESSES);
  if (unique.length === 0) throw new ControlFailure('dns', `${host} has no addresses${via}`);
  return unique;
}

const hostPort = (address: string, port: number): string => `${address.includes(':') ? `[${address}]` : address}:${port}`;

function dialAddress(options: DialOptions, address: string, connectTimeoutMs: number): Promise<TLSSocket> {
  const { host, port, tls } = options;
  const servername = tls.servername ?? (isIP(host) !== 0 ? undefined : host);
  const target = hostPort(address, port);
  // Reported as the name when one was dialled, with the address it resolved to.
  const peer = address === host ? target : `${host}:${port} (${address})`;
  return new Promise<TLSSocket>((resolve, reject) => {
    if (options.signal?.aborted === true) {
      reject(abandoned(peer));
      return;
    }
    let phase: DialPhase = 'connect';
    let nameError: Error | undefined;
    let leaf: PeerCertificate | undefined;
    const socket: TLSSocket = tlsConnect({
      host: address,
      port,
      secureContext: options.secureContext ?? createControlContext(tls),
      minVersion: 'TLSv1.3',
      ALPNProtocols: ['h2'],
      // No SNI for an IP literal: node then verifies the certificate's IP SANs against the address.
      ...(servername === undefined || isIP(servername) !== 0 ? {} : { servername }),
      // Node would destroy the socket before the certificate it refused can be read; onSecure refuses it instead,
      // naming it. Nothing is sent on the connection before that check.
      rejectUnauthorized: false,
      checkServerIdentity: (name) => {
        leaf = renderPeerCertificate.call(socket, false);
        nameError = checkServerIdentity(name, leaf);
        return nameError;
      },
    });
    skipRenderedPeerChain(socket);
    const fail = (kind: ControlErrorKind, message: string, cause?: unknown): void => {
      cleanup();
      socket.destroy();
      reject(new ControlFailure(kind, message, cause === undefined ? undefined : { cause }));
    };
    const handshakeTimeoutMs = options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS;
    let timer = setTimeout(() => fail('connect-timeout', `no TCP connection to ${target} within ${connectTimeoutMs} ms`), connectTimeoutMs);
    const onConnect = (): void => {
      phase = 'tls';
      clearTimeout(timer);
      timer = setTimeout(() => fail('tls', `TLS handshake with ${peer} did not finish within ${handshakeTimeoutMs} ms`), handshakeTimeoutMs);
    };
    const onError = (err: Error): void => {
      const where = phase === 'connect' ? `connecting to ${target}` : `TLS handshake with ${peer}`;
      fail(classifyError(err, phase), `${where}: ${describeError(err)}`, err);
    };
    const onClose = (): void =>
      fail(
        phase === 'connect' ? 'connect-refused' : 'tls',
        `${phase === 'connect' ? target : peer} closed the connection during the ${phase === 'connect' ? 'TCP connect' : 'TLS handshake'}`,
      );
    const onSecure = (): void => {
      cleanup();
      restorePeerCertificate(socket);
      if (!socket.authorized) {
        const code = String(socket.authorizationError ?? 'UNKNOWN_VERIFY_ERROR');
        const message = `TLS handshake with ${peer}: ${code}: ${nameError?.message ?? verifyErrorText(code)}; ${presentedBy(socket)}`;
        socket.destroy();
        reject(new ControlFailure('tls', message));
        return;
      }
      if (options.onPeerCertificate !== undefined) {
        // The leaf the name check rendered; a resumed session skips that check, and the socket is asked instead.
        const certificate = leaf === undefined ? summarisePeerCertificate(socket) : summariseRendered(leaf);
        if (certificate !== undefined) options.onPeerCertificate(certificate);
      }
      if (socket.alpnProtocol !== 'h2') {
        socket.destroy();
        reject(new ControlFailure('protocol', `${peer} did not negotiate HTTP/2 (ALPN ${String(socket.alpnProtocol)})`));
        return;
      }
      resolve(socket);
    };
    const onAbort = (): void => {
      cleanup();
      socket.destroy();
      reject(abandoned(peer));
    };
    function cleanup(): void {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      restorePeerCertificate(socket);
      socket.off('connect', onConnect);
      socket.off('error', onError);
      socket.off('close', onClose);
      socket.off('secureConnect', onSecure);
    }
    options.signal?.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', onConnect);
    socket.once('secureConnect', onSecure);
    socket.once('error', onError);
    socket.once('close', onClose);
  });
}

/** Why OpenSSL refused the supervisor's chain, in the words an operator acts on (code families of X509_V_ERR_*). */
function verifyErrorText(code: string): string {
  if (code === 'CERT_HAS_EXPIRED') return 'the supervisor certificate has expired';
  if (code === 'CERT_NOT_YET_VALID') return 'the supervisor certificate is not valid yet (check both clocks)';
  if (/^(UNABLE_TO_|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_SIGNATURE_FAILURE|CERT_UNTRUSTED)/.test(code)) {
    return 'the supervisor certificate is not issued by the CA in ca.pem of --tls-dir';
  }
  return 'the supervisor certificate did not verify against ca.pem of --tls-dir';
}

/** `the supervisor presented <certificate>`, read before the socket goes. */
function presentedBy(socket: TLSSocket): string {
  const summary = summarisePeerCertificate(socket);
  return summary === undefined ? 'the supervisor presented no certificate' : `the supervisor presented ${certificateText(summary)}`;
}

// Node renders the supervisor's whole chain to JS objects (getPeerCertificate(true): about ten times the cost of
// the leaf alone, the largest CPU item of a re-attach) only to hand it to checkServerIdentity, which reads the leaf's
// subjectaltname and subject and nothing else. So while the handshake runs, that one call gets a stub, and the dial's
// checkServerIdentity gives node's own check the leaf rendered alone (kept for the attach line). If node stops making that call, only the
// saving is lost: the name is still checked against the real certificate. The override goes once the handshake settles.
const RENDERED_CHAIN_STUB = Object.freeze({}) as PeerCertificate;
const renderPeerCertificate = TLSSocket.prototype.getPeerCertificate;

function skipRenderedPeerChain(socket: TLSSocket): void {
  socket.getPeerCertificate = function stubbedPeerCertificate(this: TLSSocket, detailed?: boolean) {
    return detailed === true ? RENDERED_CHAIN_STUB : renderPeerCertificate.call(this, detailed);
  } as TLSSocket['getPeerCertificate'];
}

function restorePeerCertificate(socket: TLSSocket): void {
  if (Object.hasOwn(socket, 'getPeerCertificate')) delete (socket as Partial<Pick<TLSSocket, 'getPeerCertificate'>>).getPeerCertificate;
}

