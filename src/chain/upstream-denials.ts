// The answers boundary gives when the way to the upstream fails: the dial (direct or through the corporate
// upstream proxy), the upstream TLS handshake (a refused client certificate, the interception CA missing), or an
// upstream that does not speak HTTP. Built on denials.ts.

import type { DialFailure } from './dial.js';
import { type Denial, type DenialError, denial } from './denials.js';

export function upstreamUnreachableDenial(target: string, detail: string): Denial {
  return denial(502, 'upstream_unreachable', { detail: `${target}: ${detail}` }, `: upstream ${target} unreachable`);
}

/** The upstream answered, but not in HTTP: its answer broke HTTP/1.1 framing or HTTP/2's rules, and none of it was relayed. */
export function upstreamProtocolDenial(target: string): Denial {
  return denial(
    502,
    'upstream_protocol_error',
    { detail: `${target}: the upstream's answer broke the HTTP protocol (framing or syntax) and was not relayed` },
    `: upstream ${target} broke the HTTP protocol`,
  );
}

/**
 * The upstream TLS handshake failed over the client certificate (docs/credentials.md#client-certificates): the origin's
 * alert (`certificate_required`, `unknown_ca`, `certificate_expired`, ...) or `ambiguous` names why.
 */
export function clientCertificateDenial(target: string, why: string): Denial {
  return denial(502, 'upstream_client_certificate_rejected', { detail: `${target}: client certificate ${why}`, tls_alert: why }, `: upstream ${target} refused the client certificate (${why})`);
}

/** The pinned dial failed: 504 when the upstream gave no answer in time, else 502; the failure is named in the phrase. */
const PROXY_DENIALS: Readonly<Record<string, { readonly error: DenialError; readonly what: string }>> = {
  'proxy-refused': { error: 'upstream_proxy_refused', what: 'refused the CONNECT' },
  'proxy-unreachable': { error: 'upstream_proxy_unreachable', what: 'could not be reached' },
  'proxy-timeout': { error: 'upstream_proxy_timeout', what: 'did not answer the CONNECT in time' },
  'proxy-malformed': { error: 'upstream_proxy_malformed', what: 'sent a malformed answer' },
};

/** docs/running.md#corporate-upstream-proxy: a proxy failure is a 502 naming it and, when it answered, its status. */
export function dialFailedDenial(target: string, failure: DialFailure, proxyStatus?: number): Denial {
  const proxied = PROXY_DENIALS[failure];
  if (proxied !== undefined) {
    const status = proxyStatus === undefined ? '' : ` (${proxyStatus})`;
    const fields = { detail: `${target}: the upstream proxy ${proxied.what}${status}`, dial_failure: failure, ...(proxyStatus === undefined ? {} : { upstream_proxy_status: proxyStatus }) };
    return denial(502, proxied.error, fields, `: upstream proxy ${proxied.what}${status} for ${target}`);
  }
  const status = failure === 'timeout' ? 504 : 502;
  const what = failure === 'timeout' ? 'did not answer in time' : failure === 'refused' ? 'refused the connection' : 'is unreachable';
  return denial(status, 'upstream_unreachable', { detail: `${target}: connection ${failure}`, dial_failure: failure }, `: upstream ${target} ${what}`);
}

export function tlsUnavailableDenial(target: string): Denial {
  return denial(
    503,
    'tls_termination_unavailable',
    { detail: `${target} needs TLS inspection but the interception CA is unavailable` },
    `: interception CA unavailable for ${target}`,
  );
}
