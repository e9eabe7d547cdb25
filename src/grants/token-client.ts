// One token request (RFC 6749 sections 4.4 and 6) to a grant's token endpoint: the name resolved and every answer
// checked by the SSRF rules before the only dial, TLS verified against the system roots plus --upstream-ca,
// a bounded answer read and validated. The client secret and tokens never leave as anything but request bytes.

import { request } from 'node:https';
import type { Socket } from 'node:net';
import { connect as tlsConnect, nodeRootsWith } from '../shared/node-tls.js';
import type { TokenGrantInput } from '../credentials/grant.js';
import { Secret } from '../credentials/secret.js';
import { secretValueProblem } from '../credentials/set.js';
import { isLocalName, KNOWN_METADATA_NAMES } from '../net/destination.js';
import { normaliseHost } from '../net/host.js';
import type { Resolver } from '../net/resolver.js';
import { prepareSelfAddresses, type SelfAddress, validateDestination } from '../net/ssrf.js';
import type { Timers } from '../shared/timers.js';

/** A token endpoint that has not answered in full by then counts as failed (and is retried with backoff). */
export const TOKEN_REQUEST_TIMEOUT_MS = 10_000;
/** A token answer larger than this is refused unread. */
export const MAX_TOKEN_RESPONSE_BYTES = 65_536;
/** expires_in when the server sends none (RFC 6749 makes it optional): short, so a shorter real lifetime costs little. */
export const DEFAULT_EXPIRES_IN_S = 300;
/** A longer expires_in is cut to this: a token is fetched again at least daily. */
export const MAX_EXPIRES_IN_S = 86_400;

/** Closed set, for metric labels, /readyz and logs: never a server's free text. */
export const TOKEN_FAILURES = [
  'destination-refused',
  'resolve-failed',
  'connect-failed',
  'tls-failed',
  'timeout',
  'http-status',
  'invalid-response',
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'oauth-error',
] as const;
export type TokenFailure = (typeof TOKEN_FAILURES)[number];

export type TokenOutcome =
  | { readonly ok: true; readonly accessToken: Secret; readonly expiresInS: number; readonly refreshToken: Secret | undefined }
  | { readonly ok: false; readonly reason: TokenFailure; readonly detail: string };

export interface TokenClientDeps {
  readonly resolver: Resolver;
  readonly timers: Timers;
  /** --upstream-ca's PEM, trusted besides the system roots. */
  readonly extraCaPem: () => string | undefined;
  /** --unsafe-allow-loopback-upstream: loopback token endpoints too (local development and tests). */
  readonly allowLoopback: boolean;
  /** boundary's own listeners: never a token endpoint. */
  readonly selfAddresses: () => readonly SelfAddress[];
  /** Opens TCP to one of the checked addresses as every upstream dial is opened (through --upstream-proxy, if set). */
  readonly connect: (addresses: readonly string[], port: number, name: string | undefined) => Promise<Socket>;
}

const fail = (reason: TokenFailure, detail: string): TokenOutcome => ({ ok: false, reason, detail });

/** Where a token endpoint may be dialled: the checked addresses, and its name for TLS when it has one. */
interface TokenDestination {
  readonly addresses: readonly string[];
  readonly servername: string | undefined;
}

/** Resolves and checks the endpoint: where it may be dialled, or why it may not. */
async function destination(url: URL, grant: TokenGrantInput, port: number, deps: TokenClientDeps): Promise<TokenDestination | TokenOutcome> {
  const host = normaliseHost(url.hostname);
  if (!host.ok) return fail('destination-refused', host.message);
  if (host.kind === 'name' && (isLocalName(host.host) || KNOWN_METADATA_NAMES.has(host.host))) {
    return fail('destination-refused', `${host.host} is a local or metadata name`);
  }
  let addresses: readonly string[] = [host.host];
  if (host.kind === 'name') {
    const v4 = await deps.resolver.resolve(host.host, 4);
    const answer = v4.ok ? v4 : await deps.resolver.resolve(host.host, 6);
    if (!answer.ok) return fail('resolve-failed', `${host.host}: ${answer.failure}`);
    addresses = answer.addresses;
  }
  // Public addresses only, unless the operator opted this grant into private ones (the exact-host plan: internal
  // addresses reachable, always-blocked ones and control-plane ports never).
  const hostKind = grant.privateTokenEndpoint ? (host.kind === 'name' ? 'exact' : 'ip') : 'any';
  const check = validateDestination({
    endpoint: { host: host.host, hostKind, allowedIps: [] },
    host: host.host,
    port,
    addresses,
    allowLoopback: deps.allowLoopback,
    selfAddresses: prepareSelfAddresses(deps.selfAddresses()),
  });
  if (!check.ok) return fail('destination-refused', check.message);
  return { addresses: check.addresses, servername: host.kind === 'name' ? host.host : undefined };
}

function formBody(grant: TokenGrantInput, refreshToken: Secret | undefined): string {
  const form = new URLSearchParams({ grant_type: grant.grantType });
  if (grant.grantType === 'refresh_token' && refreshToken !== undefined) form.set('refresh_token', refreshToken.reveal());
  if (grant.scope !== undefined) form.set('scope', grant.scope);
  if (grant.audience !== undefined) form.set('audience', grant.audience);
  if (grant.resource !== undefined) form.set('resource', grant.resource);
  // client_secret_post, or a public client (refresh_token without a secret): the id goes in the body.
  if (grant.clientAuth === 'client_secret_post' || grant.clientSecret === undefined) form.set('client_id', grant.clientId);
  if (grant.clientAuth === 'client_secret_post' && grant.clientSecret !== undefined) form.set('client_secret', grant.clientSecret.reveal());
  return form.toString();
}

/** RFC 6749 section 2.3.1: both parts form-urlencoded before base64. */
function basicAuthorization(grant: TokenGrantInput): string | undefined {
  if (grant.clientAuth !== 'client_secret_basic' || grant.clientSecret === undefined) return undefined;
  const enc = (text: string) => new URLSearchParams({ v: text }).toString().slice(2);
  return `Basic ${Buffer.from(`${enc(grant.clientId)}:${enc(grant.clientSecret.reveal())}`).toString('base64')}`;
}

/** The parsed answer of a 2xx, or why it cannot be used. */
function readAnswer(status: number, text: string): TokenOutcome {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fail(status >= 200 && status < 300 ? 'invalid-response' : 'http-status', `status ${status}, not JSON`);
  }
  const body = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  if (status < 200 || status > 299) {
    const code = typeof body.error === 'string' && (TOKEN_FAILURES as readonly string[]).includes(body.error) ? (body.error as TokenFailure) : undefined;
    return code === undefined ? fail(typeof body.error === 'string' ? 'oauth-error' : 'http-status', `status ${status}`) : fail(code, `status ${status}`);
  }
  const token = body.access_token;
  if (typeof token !== 'string' || secretValueProblem(token) !== undefined) return fail('invalid-response', 'access_token missing or unusable');
  // Only bearer tokens can be placed in a header as they are (a DPoP or MAC token needs a proof boundary does not make).
  if (typeof body.token_type !== 'string' || body.token_type.toLowerCase() !== 'bearer') return fail('invalid-response', 'token_type is not Bearer');
  const expires = body.expires_in === undefined ? DEFAULT_EXPIRES_IN_S : Number(body.expires_in);
  if (!Number.isFinite(expires) || expires <= 0) return fail('invalid-response', 'expires_in is not a positive number');
  const refresh = body.refresh_token;
  if (refresh !== undefined && (typeof refresh !== 'string' || secretValueProblem(refresh) !== undefined)) {
    return fail('invalid-response', 'refresh_token unusable');
  }
  return {
    ok: true,
    accessToken: new Secret(token),
    expiresInS: Math.min(expires, MAX_EXPIRES_IN_S),
    refreshToken: refresh === undefined ? undefined : new Secret(refresh),
  };
}

/** Asks the token endpoint once. Never throws; a failure is a closed reason plus a detail without any secret. */
export async function requestToken(grant: TokenGrantInput, refreshToken: Secret | undefined, deps: TokenClientDeps): Promise<TokenOutcome> {
  const url = new URL(grant.tokenEndpoint);
  const port = url.port === '' ? 443 : Number(url.port);
  const target = await destination(url, grant, port, deps);
  if (!('addresses' in target)) return target;
  const { servername } = target;
  const extra = deps.extraCaPem();
  const body = formBody(grant, refreshToken);
  const authorization = basicAuthorization(grant);
  let socket: Socket;
  try {
    socket = await deps.connect(target.addresses, port, servername);
  } catch (err) {
    return fail('connect-failed', (err as { code?: string }).code ?? 'connection failed');
  }
  return new Promise<TokenOutcome>((resolve) => {
    let settled = false;
    const finish = (outcome: TokenOutcome): void => {
      if (settled) return;
      settled = true;
      deps.timers.clearTimeout(timer);
      req.destroy();
      socket.destroy();
      resolve(outcome);
    };
    // Over the checked address's socket only; the certificate is still verified against the endpoint's name.
    const ca = nodeRootsWith(extra);
    const req = request({
      method: 'POST',
      path: `${url.pathname}${url.search}`,
      // No agent: node:http calls createConnection only when none is given (agent: false makes a fresh one).
      createConnection: () => tlsConnect({ socket, ca, ...(servername === undefined ? {} : { servername }) }),
      headers: {
        host: url.host,
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
        'content-length': Buffer.byteLength(body),
        ...(authorization === undefined ? {} : { authorization }),
      },
    });
    const timer = deps.timers.setTimeout(() => finish(fail('timeout', `no answer in ${TOKEN_REQUEST_TIMEOUT_MS} ms`)), TOKEN_REQUEST_TIMEOUT_MS);
    req.on('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? 'connection failed'; 
      finish(fail(/CERT|TLS|SSL|SELF_SIGNED|ALTNAME/.test(code) ? 'tls-failed' : 'connect-failed', code));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let total = 0;
      res.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > MAX_TOKEN_RESPONSE_BYTES) finish(fail('invalid-response', `answer larger than ${MAX_TOKEN_RESPONSE_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on('end', () => finish(readAnswer(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'))));
      res.on('error', () => finish(fail('connect-failed', 'answer cut')));
    });
    req.end(body);
  });
}
