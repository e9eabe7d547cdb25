// The one per-request evaluator shared by forward HTTP and requests inside CONNECT tunnels (parity, BY-12):
// framing, authority, scheme, path canonicalisation, decide(), and for forward requests the SSRF check.
// Returns a value: a refusal to render or a pinned destination to relay to. Never touches a socket.
// Two entry points: evaluateRequestCached (this turn, or undefined when a DNS query is needed) and evaluateRequest.

import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { type DestinationResult, isLookupRefused, isResolveFailure } from '../net/destination.js';
import { formatAuthority, type HostForm } from '../net/host.js';
import { redactPlaceholders } from '../credentials/placeholder.js';
import { percentDecode } from '../policy/query.js';
import { replayQueryKeys } from '../telemetry/replay.js';
import { timedDecide } from './metrics.js';
import type { Decision } from '../policy/types.js';
import type { ProxyContext, TunnelTarget } from './context.js';
import { type DestinationTarget, destination, destinationCached, needsInspection } from './context.js';
import {
  authorityMismatchDenial,
  type Denial,
  forwardPolicyDenial,
  framingLookalikeDenial,
  inspectionRefusalDenial,
  inspectionRefusalDetail,
  l7PolicyDenial,
  methodOverrideDenial,
  ssrfDenial,
  unsupportedL7Denial,
  unsupportedSchemeDenial,
  upstreamUnreachableDenial,
  useConnectDenial,
} from './deny.js';
import { routeHasCredentials } from './credential-injection.js';
import { refuseLookup } from './lookup-refusal.js';
import { type Outcome, type ReasonCode, settle } from './events.js';
import { checkFraming, framingLookalike, type FramingResult } from '../http1/framing.js';
import { methodOverride } from './method-override.js';
import { canonicalTarget, escapeOptionsOf, refusedEscape } from './path.js';
import { type BodyHold, bodyHold, type Inspected, type RequestShape, withoutBody } from './inspected-body.js';
import { callEventFields, jsonRpcDenial, jsonRpcRefusalDenial } from './jsonrpc-denial.js';
import { identityFields, identityFinding, requestIdentity } from './identity-gate.js';
import { parseAbsoluteTarget } from '../http1/target.js';

/**
 * What the evaluator reads of a request: an HTTP/1.1 IncomingMessage as it is, or one HTTP/2 stream's head
 * (http2/request-head.ts), whose `:authority` is its one Host and whose `httpVersion` is `2.0`.
 */
export interface RequestView {
  readonly httpVersion: string;
  readonly url?: string | undefined;
  /** Flat `[name, value, ...]`, as received; no pseudo-headers. */
  readonly rawHeaders: readonly string[];
  readonly headers: IncomingHttpHeaders;
  /** The client connection of an HTTP/1.1 request; absent for an HTTP/2 stream, which is always inside a tunnel. */
  readonly socket?: Socket | undefined;
  /** HTTP/2: the HEADERS frame did not end the stream, so a body follows whether or not Content-Length says so. */
  readonly bodyFollows?: boolean;
}

/** An allowed request and where it goes. */
export interface RelayEvaluation {
  readonly kind: 'relay';
  readonly host: string;
  readonly port: number;
  /** Origin-form target to send upstream: canonical for inspected endpoints, as received otherwise. */
  readonly target: string;
  readonly decision: Decision;
  readonly addresses: readonly string[];
  readonly tls: boolean;
  readonly framing: Extract<FramingResult, { ok: true }>;
}

export type Evaluation =
  | { readonly kind: 'bare'; readonly status: number }
  /**
   * A graphql, json-rpc or mcp endpoint selects this request: read its body (up to `limit`) and parse it by
   * `protocol` (body-hold.ts holdInspectedBody), then evaluate again with it.
   */
  | ({ readonly kind: 'body'; readonly shape: RequestShape } & BodyHold)
  | { readonly kind: 'deny'; readonly denial: Denial; readonly finding?: string }
  | RelayEvaluation;

function bare(o: Outcome, status: number, reason: ReasonCode, detail: string): Evaluation {
  settle(o, 'deny', reason, detail, status);
  return { kind: 'bare', status };
}

function refuse(o: Outcome, denial: Denial, reason: ReasonCode, detail: string, finding?: string): Evaluation {
  settle(o, denial.status >= 500 ? 'fail' : 'deny', reason, detail, denial.status);
  return finding === undefined ? { kind: 'deny', denial } : { kind: 'deny', denial, finding };
}

interface Authority {
  readonly host: string;
  readonly port: number;
  readonly kind: HostForm;
  readonly target: string;
}

type AuthorityOr = Authority | { readonly refused: Evaluation };

function forwardAuthority(ctx: ProxyContext, o: Outcome, url: string): AuthorityOr {
  const abs = parseAbsoluteTarget(url);
  if (!abs.ok) return { refused: bare(o, 400, 'bad-request', 'origin-form request sent to the proxy') };
  if (abs.scheme === 'https') return { refused: refuse(o, useConnectDenial(), 'unsupported-scheme', 'https:// in absolute form; use CONNECT') };
  if (abs.scheme !== 'http') {
    return { refused: refuse(o, unsupportedSchemeDenial(abs.scheme), 'unsupported-scheme', `scheme ${abs.scheme} is not supported`) };
  }
  const auth = ctx.authorities.http(abs.authority);
  if (!auth.ok) return { refused: bare(o, 400, 'bad-request', `bad authority: ${auth.message}`) };
  return { host: auth.host, port: auth.port, kind: auth.kind, target: abs.target };
}

function tunnelAuthority(ctx: ProxyContext, o: Outcome, url: string, hostHeader: string | undefined, scope: TunnelTarget): AuthorityOr {
  let authorityText: string | undefined = hostHeader;
  let target = url;
  if (url.charCodeAt(0) !== 47) {
    const abs = parseAbsoluteTarget(url);
    if (!abs.ok || (abs.scheme !== 'http' && abs.scheme !== 'https')) {
      return { refused: bare(o, 400, 'bad-request', 'request target is neither origin- nor absolute-form') };
    }
    authorityText = abs.authority;
    target = abs.target;
  }
  const auth = authorityText === undefined ? undefined : (scope.tls ? ctx.authorities.https : ctx.authorities.http)(authorityText);
  if (auth === undefined || !auth.ok) return { refused: bare(o, 400, 'bad-request', 'request has no valid authority') };
  if (auth.host !== scope.host || auth.port !== scope.port) {
    const expected = formatAuthority(scope.host, scope.port);
    o.host = scope.host;
    o.port = scope.port;
    const detail = `request authority ${formatAuthority(auth.host, auth.port)} differs from tunnel target ${expected}`;
    return { refused: refuse(o, authorityMismatchDenial(expected), 'authority-mismatch', detail, 'authority-mismatch') };
  }
  return { host: auth.host, port: auth.port, kind: auth.kind, target };
}

/**
 * The stricter of the wire method's and the override method's decisions (docs/destinations.md#method-override-headers):
 * a deny from either wins, then an audit; on a tie the wire method's decision stands.
 */
function stricter(wire: Decision, override: Decision): Decision {
  if (wire.verdict === 'deny') return wire;
  if (override.verdict === 'deny') return override;
  return wire.verdict === 'allow' && override.verdict === 'audit' ? override : wire;
}

function rawPath(target: string): string {
  const q = target.indexOf('?');
  return q < 0 ? target : target.slice(0, q);
}

/** An allowed forward request before its SSRF check: destinationEvaluation completes it. */
interface Unchecked {
  readonly kind: 'unchecked';
  readonly allowed: Omit<RelayEvaluation, 'kind' | 'addresses' | 'tls'>;
  readonly destination: DestinationTarget;
}

/**
 * Evaluates one request in this turn; fills in `o` (the request's decision event) as it goes. Undefined only
 * when an allowed forward request's destination needs a DNS query: then `await evaluateRequest(...)`, which
 * evaluates it again from the start (pure and cheap beside the query; `o` ends up the same).
 */
export function evaluateRequestCached(
  ctx: ProxyContext,
  req: RequestView,
  scope: TunnelTarget | undefined,
  o: Outcome,
  inspected?: Inspected,
): Evaluation | undefined {
  const evaluation = evaluatePolicy(ctx, req, scope, o, inspected);
  if (evaluation.kind !== 'unchecked') return evaluation;
  const dest = destinationCached(ctx, evaluation.destination);
  return dest === undefined ? undefined : destinationEvaluation(o, evaluation.allowed, dest);
}

/** Evaluates one request, resolving a forward request's destination when it must; fills in `o` as it goes. */
export async function evaluateRequest(
  ctx: ProxyContext,
  req: RequestView,
  scope: TunnelTarget | undefined,
  o: Outcome,
  inspected?: Inspected,
): Promise<Evaluation> {
  const evaluation = evaluatePolicy(ctx, req, scope, o, inspected);
  if (evaluation.kind !== 'unchecked') return evaluation;
  return destinationEvaluation(o, evaluation.allowed, await destination(ctx, evaluation.destination));
}

/** Everything up to the SSRF check, which only an allowed forward request still needs. */
function evaluatePolicy(ctx: ProxyContext, req: RequestView, scope: TunnelTarget | undefined, o: Outcome, body?: Inspected): Evaluation | Unchecked {
  const framing = checkFraming(req.httpVersion, req.rawHeaders);
  if (!framing.ok) return bare(o, framing.status, framing.status === 431 ? 'head-too-large' : 'bad-request', framing.problem);
  const url = req.url ?? '';
  const auth = scope === undefined ? forwardAuthority(ctx, o, url) : tunnelAuthority(ctx, o, url, framing.host, scope);
  if ('refused' in auth) return auth.refused;
  const { host, port, kind } = auth;
  let target = auth.target;
  o.host = host;
  o.port = port;
  if (scope?.tls === true) o.scheme = 'https';
  // docs/destinations.md#framing-header-lookalikes: refused on every route, L4 ones too, before anything is decided.
  const lookalike = framingLookalike(req.rawHeaders);
  if (lookalike !== undefined) {
    o.path = redactPlaceholders(rawPath(target));
    return refuse(o, framingLookalikeDenial(lookalike), 'framing-header-lookalike', `a header name folds into ${lookalike}`);
  }
  const method = o.method;
  /** The method the decision that stands was made for: the override's when that one was stricter. */
  let decidedMethod = method;
  let overrideMethod: string | undefined;
  /** What policy read of the body (or of a bodiless GraphQL GET, MCP stream or session end). */
  let read: Inspected | undefined = body;
  const policy = ctx.store.current();
  o.generation = policy.generation;
  o.policyHash = policy.hash;
  const adapter = o.adapter;
  // docs/destinations.md#http2: cleartext HTTP/2 is taken by prior knowledge only; an h2c upgrade is refused, never passed on.
  if (framing.upgrade?.includes('h2c')) {
    o.path = redactPlaceholders(rawPath(target));
    return refuse(o, unsupportedL7Denial('h2c upgrades are not supported'), 'unsupported-l7-protocol', 'h2c upgrade refused');
  }
  // docs/identity.md: the tunnel's process, or the forward connection's (forward.ts waited for its lookup).
  const identity = requestIdentity(ctx.identity, req.socket, scope);
  // L4 first: which endpoints match host:port decides whether the request is inspected at all.
  const l4 = timedDecide(ctx.metrics, policy, { adapter, host, port, identity });
  let decision = l4;
  const inspected = l4.verdict !== 'deny' && l4.endpoints.some(needsInspection);
  // A credentialed route is canonicalised even on an L4 endpoint: the credential scope matches provider
  // path globs against the path the upstream will act on, never a raw `/v1/../admin`.
  if (inspected || (l4.verdict !== 'deny' && routeHasCredentials(ctx.credentials, l4, host, port))) {
    const canon = canonicalTarget(target, escapeOptionsOf(l4.endpoints));
    if (!canon.ok) {
      o.path = undefined;
      return bare(o, 400, 'bad-request', `request target refused: ${canon.problem}`);
    }
    // docs/policy.md#path-canonicalisation: policy and logs see `[CREDENTIAL]`, never a placeholder.
    const shown = redactPlaceholders(canon.path);
    o.path = shown;
    if (inspected) {
      const query = redactPlaceholders(canon.query);
      // docs/policy.md#trailing-dots-and-spaces: Windows and IIS read `/admin.` as `/admin`, so that reading is
      // decided too and the stricter stands, as for a method override.
      const stripped = canon.strippedPath === undefined ? undefined : redactPlaceholders(canon.strippedPath);
      // docs/policy.md#graphql-inspection, #json-rpc-and-mcp-inspection: a body policy reads is held first (once).
      const hold = body === undefined ? bodyHold(l4.endpoints, shown) : undefined;
      if (hold !== undefined) {
        const upgrade = framing.upgrade !== undefined;
        const hasBody = framing.hasBody || req.bodyFollows === true;
        const shape = { method, query, accept: req.headers.accept, contentType: req.headers['content-type'], hasBody, upgrade };
        const bodiless = withoutBody(hold, shape);
        if (bodiless === 'hold') return { kind: 'body', ...hold, shape };
        read = bodiless;
      }
      // docs/policy.md#one-reading: a request the origin could read otherwise than boundary is refused, never decided.
      if (read !== undefined && 'refused' in read) {
        const denial = read.protocol === 'graphql' ? inspectionRefusalDenial(read.refused) : jsonRpcRefusalDenial(read.refused);
        return refuse(o, denial, read.refused.reason, inspectionRefusalDetail(read.refused));
      }
      const extra = read === undefined ? { identity } : { identity, ...read };
      const decideAs = (m: string): Decision => {
        const asWritten = timedDecide(ctx.metrics, policy, { adapter, host, port, method: m, path: shown, query, ...extra });
        if (stripped === undefined) return asWritten;
        return stricter(asWritten, timedDecide(ctx.metrics, policy, { adapter, host, port, method: m, path: stripped, query, ...extra }));
      };
      decision = decideAs(method);
      // docs/destinations.md#method-override-headers: a framework that honours the override acts on its method,
      // so both are decided and the request goes upstream only when both are allowed.
      const override = methodOverride(req.rawHeaders);
      if (override !== undefined && !override.ok) {
        return refuse(o, methodOverrideDenial(override.problem), 'method-override-invalid', `method override refused: ${override.problem}`);
      }
      if (override !== undefined && override.method !== method) {
        const overridden = decideAs(override.method);
        const standing = stricter(decision, overridden);
        if (standing === overridden) decidedMethod = override.method;
        decision = standing;
        overrideMethod = override.method;
      }
    }
    const keptEscape = refusedEscape(canon, decision.endpoint);
    if (keptEscape !== undefined) return bare(o, 400, 'bad-request', `request target refused: ${keptEscape}`);
    target = canon.query === '' ? canon.path : `${canon.path}?${canon.query}`;
  } else {
    if (target.includes('#')) return bare(o, 400, 'bad-request', 'request target refused: fragment');
    o.path = redactPlaceholders(rawPath(target));
  }
  o.policy = decision.policy;
  o.engine = decision.layer === 'l7' ? 'l7' : 'opa';
  const extra = { rule: decision.rule, endpoint: decision.endpoint?.id, ...identityFields(decision, identity) };
  o.extra = overrideMethod === undefined ? extra : { ...extra, method_override: overrideMethod };
  if (decision.calls !== undefined && decision.calls.length > 0) o.extra = { ...o.extra, ...callEventFields(decision.calls) };
  if (decision.verdict === 'deny') {
    const detail = decision.detail;
    const q = target.indexOf('?');
    // Keys only, for the denial's replay fields: a query value may carry anything, a secret included.
    if (q >= 0) o.queryKeys = replayQueryKeys(target.slice(q + 1).replace(/#.*$/s, ''), percentDecode, redactPlaceholders);
    if (decision.reason === 'unsupported-l7-protocol') return refuse(o, unsupportedL7Denial(detail), decision.reason, detail);
    const path = o.path ?? '/';
    const denied = { policy, adapter };
    const policyDenial = (): Denial => decision.layer === 'l7'
      ? l7PolicyDenial({ method: decidedMethod, path, host, port }, decision, denied)
      : forwardPolicyDenial(method, formatAuthority(host, port), path, decision, { ...denied, host, port });
    // docs/policy.md#denials-as-json-rpc-errors: a request with ids is answered as JSON-RPC, so the session goes on.
    const denial = read !== undefined && 'jsonRpc' in read ? jsonRpcDenial(read.jsonRpc, decision, policyDenial) : policyDenial();
    return refuse(o, denial, decision.reason, detail, identityFinding(decision));
  }
  // No status yet: the upstream's answer records it.
  settle(o, decision.verdict, decision.reason, decision.detail, undefined);
  if (scope !== undefined) {
    return { kind: 'relay', host, port, target, decision, addresses: scope.addresses, tls: scope.tls, framing };
  }
  const destination = { host, kind, port, endpoint: decision.endpoint, endpoints: decision.endpoints };
  return { kind: 'unchecked', allowed: { host, port, target, decision, framing }, destination };
}

/** The SSRF check's verdict on an allowed forward request: where it may go, or why it may not. */
function destinationEvaluation(
  o: Outcome,
  allowed: Omit<RelayEvaluation, 'kind' | 'addresses' | 'tls'>,
  dest: DestinationResult,
): Evaluation {
  const { host, port } = allowed;
  if (isLookupRefused(dest)) return { kind: 'deny', denial: refuseLookup(o, formatAuthority(host, port), dest.refusal) };
  if (isResolveFailure(dest)) {
    return refuse(o, upstreamUnreachableDenial(formatAuthority(host, port), dest.failure), 'resolve-failed', dest.message);
  }
  if (!dest.ok) {
    o.engine = 'ssrf';
    o.policy = undefined;
    o.extra = { ...o.extra, plan: dest.plan, check: dest.check, dropped: dest.dropped.map((d) => `${d.ip} ${d.class}`) };
    return refuse(o, ssrfDenial(formatAuthority(host, port), dest.check, dest.message), 'ssrf-denied', dest.message);
  }
  if (dest.dropped.length > 0) o.extra = { ...o.extra, dropped: dest.dropped.map((d) => `${d.ip} ${d.class}`) };
  return { kind: 'relay', host, port, target: allowed.target, decision: allowed.decision, addresses: dest.addresses, tls: false, framing: allowed.framing };
}
