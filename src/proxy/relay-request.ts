// What forward HTTP/1.1 (forward.ts) and HTTP/2 streams (h2-stream.ts) share once the request chain let a request
// go: how a failed upstream exchange is answered and recorded. Adapters only render; the result goes on the request.

import type { ChainRequest } from '../chain/request.js';
import { credentialRefusal } from '../chain/stages/credentials.js';
import { denied, type Refusal } from '../chain/stage.js';
import { formatAuthority } from '../net/host.js';
import { MarkerInBodyError } from '../chain/credential-injection.js';
import { MiddlewareStreamDeniedError } from '../chain/middleware-request.js';
import { methodOverrideDenial } from '../chain/denials.js';
import { clientCertificateDenial, upstreamProtocolDenial, upstreamUnreachableDenial } from '../chain/upstream-denials.js';
import { isBoundaryError } from '../shared/errors.js';
import { dialRefusalOf, isDialError } from '../chain/dial.js';
import { ClientCertificateError } from './upstream.js';

export const CLIENT_CLOSED_DETAIL = 'client closed before upstream answered';

/** The client went away before the upstream answered; the message is the event's detail. */
export class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
}

/**
 * A method-override header in the request's trailers (docs/destinations.md#method-override-headers): it came after the
 * request was decided on its head, so it is refused as an override that cannot be decided, and nothing more goes up.
 */
export class OverrideInTrailersError extends Error {
  override readonly name = 'OverrideInTrailersError';
}

/** An error of class `kind` thrown by the body iterator, or wrapped in `cause` on the way out. */
function thrown<T extends Error>(err: unknown, kind: new (...args: never[]) => T): T | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    if (e instanceof kind) return e;
  }
  return undefined;
}

/** The marker scanner's abort, as thrown by the body iterator (or wrapped in `cause`). */
export function markerError(err: unknown): MarkerInBodyError | undefined {
  return thrown(err, MarkerInBodyError);
}

/**
 * The upstream exchange failed before any byte of the answer reached the client: the refusal to answer it with
 * (recorded on the request), or undefined when there is no one to answer (the client left).
 * `sent`: the head went upstream, so the origin may act on it and the event keeps the allow that sent it (issue 15).
 */
export function upstreamFailure(r: ChainRequest, err: Error, sent: boolean): Refusal | undefined {
  const marker = markerError(err);
  if (marker !== undefined) {
    // The scanner stopped the body before the marker's bytes were released upstream (CR-12/13).
    const refused = credentialRefusal(r, marker.refusal);
    r.settle(refused);
    return refused;
  }
  // A network middleware reading the body as it streamed denied it before the bytes it found went upstream.
  const stopped = thrown(err, MiddlewareStreamDeniedError);
  if (stopped !== undefined) {
    r.settle(stopped.refusal);
    return stopped.refusal;
  }
  if (err instanceof OverrideInTrailersError) {
    const refused = denied(methodOverrideDenial('override-in-trailers'), 'method-override-invalid', 'method override refused: override-in-trailers');
    r.settle(refused);
    return refused;
  }
  if (err instanceof ClientClosedError) {
    const verdict = sent ? (r.decision?.verdict === 'audit' ? 'audit' : 'allow') : 'fail';
    r.settle({ verdict, reason: 'client-closed', detail: err.message, status: r.upstream.status });
    return undefined;
  }
  const target = formatAuthority(r.host as string, r.port as number);
  if (isBoundaryError(err) && err.code === 'UPSTREAM_PROTOCOL_ERROR') {
    const denial = upstreamProtocolDenial(target);
    const refused: Refusal = { verdict: 'fail', reason: 'upstream-protocol-error', detail: err.message, status: denial.status, denial, finding: undefined };
    r.settle(refused);
    return refused;
  }
  const certificate = clientCertificateFailure(err);
  if (certificate !== undefined) {
    const denial = clientCertificateDenial(target, certificate);
    const reason = certificate === 'ambiguous' ? 'client-certificate-ambiguous' : 'client-certificate-rejected';
    const refused: Refusal = { verdict: 'fail', reason, detail: `client certificate ${certificate}`, status: denial.status, denial, finding: undefined };
    r.settle(refused);
    return refused;
  }
  if (isDialError(err)) {
    // RX-11: as on CONNECT, timeout, refused, unreachable and the upstream proxy's failures stay apart.
    const { reason, failure, proxyStatus, denial } = dialRefusalOf(target, err);
    r.upstream.dialFailure = failure;
    r.upstream.proxyStatus = proxyStatus;
    const refused: Refusal = { verdict: 'fail', reason, detail: err.message, status: denial.status, denial, finding: undefined };
    r.settle(refused);
    return refused;
  }
  const denial = upstreamUnreachableDenial(target, 'upstream error');
  const refused: Refusal = { verdict: 'fail', reason: 'upstream-failed', detail: err.message, status: denial.status, denial, finding: undefined };
  r.settle(refused);
  return refused;
}

/** TLS alerts an origin sends about the client's certificate (OpenSSL's error codes for them, any protocol version). */
const CLIENT_CERTIFICATE_ALERT = /^ERR_SSL_(?:SSLV3|TLSV1|TLSV13)_ALERT_(BAD_CERTIFICATE|UNSUPPORTED_CERTIFICATE|CERTIFICATE_REVOKED|CERTIFICATE_EXPIRED|CERTIFICATE_UNKNOWN|UNKNOWN_CA|ACCESS_DENIED|CERTIFICATE_REQUIRED)$/;

/**
 * Why the upstream refused the client certificate (the alert's name, as `certificate_expired`), `ambiguous` when two
 * were bound to the destination, or undefined for any other failure. TLS 1.3 sends the alert after the client's
 * handshake ended, so it can surface on the exchange rather than the connect: the cause chain is read either way.
 */
export function clientCertificateFailure(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (e instanceof ClientCertificateError) return e.why;
    const alert = typeof code === 'string' ? CLIENT_CERTIFICATE_ALERT.exec(code) : null;
    if (alert !== null) return (alert[1] as string).toLowerCase();
  }
  return undefined;
}

/** Anything thrown on the way, recorded as the request's failure. */
export function failed(r: ChainRequest, err: unknown): void {
  r.settle({ verdict: 'fail', reason: 'upstream-failed', detail: err instanceof Error ? err.message : String(err), status: r.upstream.status });
}
