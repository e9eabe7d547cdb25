// Denial responses (docs/destinations.md#denial-responses): JSON bodies with `Connection: close`, written either on a raw socket
// (CONNECT, before any 200) or through a ServerResponse. Shapes only; never decides anything.

import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Decision } from '../policy/types.js';
import { POLICY_HEADER } from '../http1/headers.js';

const DENIAL_ERRORS = [
  'policy_denied',
  'ssrf_denied',
  'request_authority_mismatch',
  'unsupported_l7_protocol',
  'unsupported_proxy_scheme',
  'use_connect_for_https',
  'upstream_unreachable',
  'tls_termination_unavailable',
  'too_many_connections',
  'uninspected_credentials',
  'credential_endpoint_mismatch',
  'credential_unavailable',
  'credential_body_too_large',
] as const;
type DenialError = (typeof DENIAL_ERRORS)[number];

export interface Denial {
  readonly status: number;
  readonly error: DenialError;
  readonly body: Readonly<Record<string, unknown>>;
  /** Policy key for the X-Boundary-Policy header (L7 denials). */
  readonly policy?: string;
}

function denial(status: number, error: DenialError, fields: Record<string, unknown>, policy?: string): Denial {
  return { status, error, body: { error, ...fields }, ...(policy === undefined ? {} : { policy }) };
}

export function connectPolicyDenial(target: string, decision: Decision): Denial {
  return denial(403, 'policy_denied', { detail: `CONNECT ${target} not permitted by policy`, reason: decision.reason });
}

export function forwardPolicyDenial(method: string, target: string, path: string, decision: Decision): Denial {
  return denial(403, 'policy_denied', { detail: `${method} ${target}${path} not permitted by policy`, reason: decision.reason });
}

export function policyChangedDenial(target: string): Denial {
  return denial(403, 'policy_denied', { detail: `CONNECT ${target} denied: policy changed while connecting`, reason: 'policy-changed' });
}

/** The L7 body: field-compatible with OpenShell; `path` is the canonical path, never the query. */
export function l7PolicyDenial(request: { method: string; path: string; host: string; port: number }, decision: Decision): Denial {
  const { method, path, host, port } = request;
  const protocol = decision.endpoint?.protocol ?? 'rest';
  return denial(
    403,
    'policy_denied',
    {
      policy: decision.policy ?? null,
      rule: decision.rule ?? `${method} ${path}`,
      detail: decision.detail,
      reason: decision.reason,
      layer: 'l7',
      protocol,
      method,
      path,
      host,
      port,
      rule_missing: { type: `${protocol}_allow`, layer: 'l7', method, path, host, port },
      next_steps: [],
    },
    decision.policy ?? '-',
  );
}

export function ssrfDenial(target: string, check: string, message: string): Denial {
  return denial(403, 'ssrf_denied', { detail: `${target} blocked: ${check} check failed`, check, message });
}

export function authorityMismatchDenial(expected: string): Denial {
  return denial(403, 'request_authority_mismatch', {
    message: `the request authority must equal the tunnel target ${expected}`,
  });
}

export function unsupportedL7Denial(detail: string): Denial {
  return denial(403, 'unsupported_l7_protocol', { detail });
}

export function upstreamUnreachableDenial(target: string, detail: string): Denial {
  return denial(502, 'upstream_unreachable', { detail: `${target}: ${detail}` });
}

export function tlsUnavailableDenial(target: string): Denial {
  return denial(503, 'tls_termination_unavailable', {
    detail: `${target} needs TLS inspection but the interception CA is unavailable`,
  });
}

/** docs/credentials.md#inspectable-routes-only: a credentialed route that cannot be inspected (`tls: skip`, raw TCP). */
export function uninspectedCredentialsDenial(target: string): Denial {
  return denial(403, 'uninspected_credentials', {
    detail: `${target} carries credentials but its route is not inspected; set allow_uninspected_credentials to permit it`,
  });
}

/** A credential rewrite refusal: `{ error, message }` exactly as the credentials module phrased it. */
export function credentialDenial(refusal: { readonly status: number; readonly error: DenialError; readonly message: string }): Denial {
  return denial(refusal.status, refusal.error, { message: refusal.message });
}

export function tooManyConnectionsDenial(limit: number): Denial {
  return denial(503, 'too_many_connections', { detail: `the proxy holds its limit of ${limit} connections` });
}

export function unsupportedSchemeDenial(scheme: string): Denial {
  return denial(400, 'unsupported_proxy_scheme', { detail: `scheme ${scheme} is not supported by this proxy` });
}

export function useConnectDenial(): Denial {
  return denial(400, 'use_connect_for_https', {
    detail: 'https:// URLs must be sent through a CONNECT tunnel (set HTTPS_PROXY), not in absolute form',
  });
}

/** The whole response as bytes, for sockets with no HTTP machinery attached. */
export function renderDenial(d: Denial): string {
  const body = JSON.stringify(d.body);
  const policy = d.policy === undefined ? '' : `${POLICY_HEADER}: ${d.policy}\r\n`;
  return (
    `HTTP/1.1 ${d.status} ${STATUS_CODES[d.status] ?? ''}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n${policy}connection: close\r\n\r\n${body}`
  );
}

export function writeDenialToSocket(socket: Socket, d: Denial): void {
  if (socket.writable) socket.end(renderDenial(d));
  else socket.destroy();
}

/** A bare status with no body (400/431 for malformed or oversized heads). */
export function writeBareStatusToSocket(socket: Socket, status: number): void {
  if (socket.writable) socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
  else socket.destroy();
}

export function sendDenial(res: ServerResponse, d: Denial): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(d.body);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  };
  if (d.policy !== undefined) headers[POLICY_HEADER] = d.policy;
  res.writeHead(d.status, headers);
  res.end(body);
}

export function sendBareStatus(res: ServerResponse, status: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-length': 0, connection: 'close' });
  res.end();
}
