// The steps every relayed request takes between its evaluation and the upstream, for HTTP/1.1 (forward.ts) and HTTP/2
// streams (h2-stream.ts) alike: evaluated (in the turn it arrived in when the decision is cached), its body held and
// evaluated again where an inspecting endpoint needs it (body-hold.ts), refused or prepared, its body held where a
// credential or a signature needs it (upstream-body.ts), then sent; and how a failed upstream exchange is answered.
// What differs by protocol (how an answer is written, how the body is framed, the send itself) are the hooks of
// RelayingRequest.

import type { RewriteRefusal } from '../credentials/outcome.js';
import type { H1Exchange } from '../http1/h1-client.js';
import { formatAuthority } from '../net/host.js';
import { type HoldingRequest, holdInspectedBody } from './body-hold.js';
import { type BodyResult, credentialRefusal, MarkerInBodyError, scannedBody, type UpstreamHead } from './credential-injection.js';
import { type Denial, methodOverrideDenial, upstreamUnreachableDenial } from './deny.js';
import { dialFailureOf, isDialError } from './dial.js';
import { findingEvent, settle } from './events.js';
import { scannedMessages } from './h2-body.js';
import { identityCheck } from './identity-gate.js';
import { type Evaluation, evaluateRequest, evaluateRequestCached, type RelayEvaluation } from './l7.js';
import type { SignedResult } from './sigv4-request.js';
import { type ToolsListPlan, toolsListPlan } from './tools-list-filter.js';
import { heldBody, prepareHead } from './upstream-body.js';

/** The client went away before the upstream answered. */
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

/** How an allowed request's body goes upstream. */
export interface BodyFraming {
  readonly hasBody: boolean;
  /** gRPC and Connect streaming: messages are released one by one and never held for the credential check. */
  readonly streamed: boolean;
}

export type UpstreamBody = Buffer | AsyncIterable<Buffer> | null;

/** A request in its own protocol, as the shared steps drive it. */
export interface RelayingRequest extends HoldingRequest {
  /** Where the request goes, once allowed: its authority names a failed upstream in the 502. */
  destination: RelayEvaluation | undefined;
  /** docs/policy.md#filtering-toolslist: the tools/list answers this request's response carries, to filter. */
  toolsList: ToolsListPlan | undefined;
  readonly exchange: H1Exchange | undefined;
  /** Answers with a bare status (the evaluator's `bare` outcome). */
  answerStatus(status: number): void;
  /** Answers a denial made before the body was read. */
  answerDenial(denial: Denial): void;
  /** The allowed request's body framing; undefined when the request cannot be relayed and was answered instead. */
  bodyFraming(evaluation: RelayEvaluation): BodyFraming | undefined;
  /** The head is prepared and the request will go upstream: what the protocol must do before its body is read. */
  goingUpstream(framing: BodyFraming): void;
  send(head: UpstreamHead, headers: string[], body: UpstreamBody): void;
}

/**
 * Evaluates the request and relays the outcome: in this turn when the decision is cached, else once DNS answered;
 * after the connection's holders are looked up again where an endpoint at its target needs the process.
 */
export function evaluateAndRelay(request: RelayingRequest): void {
  const looked = identityCheck(request.ctx, request.req, request.scope);
  if (looked === undefined) evaluateNow(request);
  else looked.then(() => evaluateNow(request), (err: unknown) => request.fail(err));
}

function evaluateNow(request: RelayingRequest): void {
  let evaluation: Evaluation | undefined;
  try {
    evaluation = evaluateRequestCached(request.ctx, request.req, request.scope, request.o);
  } catch (err) {
    request.fail(err);
    return;
  }
  if (evaluation !== undefined) relayEvaluation(request, evaluation);
  else evaluateRequest(request.ctx, request.req, request.scope, request.o).then((e) => relayEvaluation(request, e), (err: unknown) => request.fail(err));
}

/** Answers or relays an evaluated request; every path that answers here emits the request's event. */
export function relayEvaluation(request: RelayingRequest, evaluation: Evaluation): void {
  // docs/policy.md#graphql-inspection: the one place a request's body is held before the decision.
  if (evaluation.kind === 'body') {
    holdInspectedBody(request, evaluation);
    return;
  }
  let answered: boolean;
  try {
    answered = relayEvaluated(request, evaluation);
  } catch (err) {
    request.fail(err);
    return;
  }
  if (answered) request.report();
}

/** True when the request is answered already; false when the upstream exchange (or the held body) took it over. */
function relayEvaluated(request: RelayingRequest, evaluation: Exclude<Evaluation, { kind: 'body' }>): boolean {
  const { ctx, o } = request;
  if (evaluation.kind === 'bare') {
    request.answerStatus(evaluation.status);
    return true;
  }
  if (evaluation.kind === 'deny') {
    // Never a 100 Continue for a refused request: the body is not read (SM-16).
    request.answerDenial(evaluation.denial);
    if (evaluation.finding !== undefined) ctx.sink.emit(findingEvent(o, evaluation.finding));
    return true;
  }
  const framing = request.bodyFraming(evaluation);
  if (framing === undefined) return true;
  const prepared = prepareHead(ctx, evaluation, { method: o.method, httpVersion: request.req.httpVersion, rawHeaders: request.req.rawHeaders });
  if (!prepared.ok) {
    refuseRewrite(request, prepared);
    return true;
  }
  const { head } = prepared;
  request.goingUpstream(framing);
  request.destination = evaluation;
  request.toolsList = toolsListPlan(ctx.store.current(), evaluation.decision, { host: evaluation.host, port: evaluation.port, path: o.path ?? '/', method: o.method });
  const { hasBody, streamed } = framing;
  const held = heldBody(ctx, { evaluation, prepared, req: request.req, body: request.body, method: o.method, hasBody, streamed });
  if (held !== undefined) {
    held.then(
      (result) => relayHeld(request, head, result),
      (err: unknown) => request.fail(err),
    );
    return false;
  }
  request.send(head, head.headers, !hasBody ? null : streamed ? scannedMessages(request.body) : scannedBody(request.body));
  return false;
}

function relayHeld(request: RelayingRequest, head: UpstreamHead, result: BodyResult | SignedResult): void {
  try {
    if (result.ok) {
      // OpenShell's "SigV4 re-signed" event, as fields of the request's one decision event (no key, no signature).
      if ('signed' in result) request.o.extra = { ...request.o.extra, sigv4: result.signed };
      request.send(head, result.headers, result.body);
      return;
    }
    refuseRewrite(request, result);
  } catch (err) {
    request.fail(err);
    return;
  }
  request.report();
}

/** A credential rewrite refused the request: its denial, in the protocol's way, and the finding it carries. */
export function refuseRewrite(request: RelayingRequest, refusal: RewriteRefusal): void {
  const { denial, finding } = credentialRefusal(request.o, refusal);
  request.refuseHeld(denial);
  if (finding !== undefined) request.ctx.sink.emit(findingEvent(request.o, finding));
}

/** The marker scanner's abort, as thrown by the body iterator (or wrapped in `cause`). */
export function markerError(err: unknown): MarkerInBodyError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    if (e instanceof MarkerInBodyError) return e;
  }
  return undefined;
}

/** The upstream exchange failed before any byte of the answer reached the client: the answer and the event's reason. */
export function answerUpstreamFailure(request: RelayingRequest, err: Error): void {
  const o = request.o;
  const marker = markerError(err);
  if (marker !== undefined) {
    // The scanner stopped the body before the marker's bytes were released upstream (CR-12/13).
    refuseRewrite(request, marker.refusal);
    return;
  }
  if (err instanceof OverrideInTrailersError) {
    settle(o, 'deny', 'method-override-invalid', 'method override refused: override-in-trailers', 400);
    request.answerDenial(methodOverrideDenial('override-in-trailers'));
    return;
  }
  if (err instanceof ClientClosedError) {
    // Issue 15: once the head went upstream the origin may act on it, so the event keeps the allow that sent
    // it (HTTP Activity, method and path); before that nothing left the boundary and the request failed.
    settle(o, request.exchange?.sent === true ? o.verdict : 'fail', 'client-closed', 'client closed before upstream answered', o.status);
    return;
  }
  const where = request.destination ?? request.scope;
  if (where === undefined) throw err;
  const dial = isDialError(err);
  settle(o, 'fail', dial ? 'dial-failed' : 'upstream-failed', err.message, 502);
  // RX-11: as on CONNECT, timeout, refused and unreachable stay apart in the event.
  if (dial) o.extra = { ...o.extra, dial_failure: dialFailureOf(err) };
  request.answerDenial(upstreamUnreachableDenial(formatAuthority(where.host, where.port), dial ? 'connection failed' : 'upstream error'));
}
