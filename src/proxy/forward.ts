// Relays one evaluated HTTP request (forward proxy or inside a tunnel) through http1/h1-client.ts and streams the
// answer back; keep-alive on both sides. Emits the request's one decision event: the allow once upstream answered,
// or once the client left after the head went upstream (issue 15).

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { RewriteRefusal } from '../credentials/outcome.js';
import type { CredentialScope } from '../credentials/scope.js';
import { formatAuthority } from '../net/host.js';
import { dialFailureOf, isDialError } from './dial.js';
import type { ProxyContext, TunnelScope } from './context.js';
import { type BodyResult, credentialRefusal, MarkerInBodyError, redactResponseHeaders, scannedBody, type UpstreamHead } from './credential-injection.js';
import { type Denial, lingerAfterAnswer, sendBareStatus, sendDenial, upstreamUnreachableDenial } from './deny.js';
import { beginOutcome, emitOutcome, findingEvent, type Outcome, settle } from './events.js';
import { observeSince } from './metrics.js';
import type { H1Exchange, H1Handler } from '../http1/h1-client.js';
import type { H1Request } from '../http1/h1-request.js';
import { clientResponseHeaders } from '../http1/headers.js';
import type { SignedResult } from './sigv4-request.js';
import { heldBody, prepareHead } from './upstream-body.js';
import { type Evaluation, evaluateRequest, evaluateRequestCached, type RelayEvaluation } from './l7.js';
import { holdInspectedBody } from './body-hold.js';
import { filteringHandler, identityEncoding, type ToolsListPlan, toolsListPlan } from './tools-list-filter.js';

/** The marker scanner's abort, as thrown by the body iterator (or wrapped in `cause`). */
function markerError(err: unknown): MarkerInBodyError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    if (e instanceof MarkerInBodyError) return e;
  }
  return undefined;
}

/** The 'request' and 'checkContinue' handler of the shared HTTP server. */
export function createRequestHandler(ctx: ProxyContext) {
  return function handleProxyRequest(req: IncomingMessage, res: ServerResponse, expectContinue = false): void {
    const scope = ctx.scopes.get(req.socket);
    const o = beginOutcome(scope === undefined ? 'forward' : 'l7', 'http', req.socket);
    o.method = req.method ?? 'UNKNOWN';
    new ForwardedRequest(ctx, req, res, o, scope, expectContinue).start();
  };
}

/** The client went away before the upstream answered: the request is aborted, nothing is sent. */
/** Content-Length of a flat `[name, value, ...]` list; 0 when absent (a chunked body's size is not known up front). */
function declaredLength(headers: readonly string[]): number {
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] ?? '').toLowerCase() === 'content-length') return Number(headers[i + 1]) || 0;
  }
  return 0;
}

class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
}

/** The client response head could not be written (e.g. a header value Node refuses). */
class ResponseHeadError extends Error {
  override readonly name = 'ResponseHeadError';
}

/** The request each client response is relaying, while its upstream exchange runs (set in send(), cleared in finish()). */
const relays = new WeakMap<ServerResponse, ForwardedRequest>();

// Shared listeners (`this` is the response): no closures per request.
function onClientClose(this: ServerResponse): void {
  const relay = relays.get(this);
  if (relay === undefined || relay.settled) return;
  relay.clientClosed = true;
  relay.exchange?.abort(new ClientClosedError('client closed'));
}

function onClientDrain(this: ServerResponse): void {
  const relay = relays.get(this);
  if (relay === undefined) return;
  relay.waiting = false;
  relay.exchange?.resume();
}

/**
 * One request from evaluation to its decision event, and the handler of its upstream exchange. Runs in the
 * turn the request arrived in unless something must really be waited for (a DNS query, a body to hold,
 * the upstream's answer): no promise is made for the rest. Every path ends in report(), which emits the one
 * event; an exception on any path becomes a 502 (or a cut connection once the head is out) via fail().
 *
 * Upstream answer: a response that arrived whole in one read goes out as writeHead + end(body), one client
 * write. Backpressure pauses the upstream socket until `res` drains; a client that goes away aborts the
 * upstream exchange (its socket is destroyed, never reused). Errors after the head cut the client connection,
 * as a half-sent response cannot turn into an error status.
 */
class ForwardedRequest implements H1Handler {
  readonly ctx: ProxyContext;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly o: Outcome;
  readonly scope: TunnelScope | undefined;
  /** Cleared once the 100 Continue went out (an inspected body is read before the decision). */
  expectContinue: boolean;
  /** What goes upstream as the body: the request itself, or the inspected body already held. */
  body: AsyncIterable<Buffer>;
  /** The client connection, kept: `req.socket` is let go of once the exchange is over. */
  readonly clientSocket: Socket;
  /** Where the request goes, once evaluated: its authority names a failed upstream in the 502. */
  destination: RelayEvaluation | undefined = undefined;
  credentialScope: CredentialScope | undefined = undefined;
  /** docs/policy.md#filtering-toolslist: the tools/list answers this request's response carries, to filter. */
  toolsList: ToolsListPlan | undefined = undefined;
  exchange: H1Exchange | undefined = undefined;
  headSent = false;
  /** The upstream exchange is over (or never started): a client close no longer aborts it. */
  settled = false;
  clientClosed = false;
  waiting = false;
  reported = false;
  /** metrics.now() when the request went upstream, and the response body bytes relayed so far. */
  sentAt = 0;
  responseBytes = 0;

  constructor(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, o: Outcome, scope: TunnelScope | undefined, expectContinue: boolean) {
    this.ctx = ctx;
    this.req = req;
    this.res = res;
    this.o = o;
    this.scope = scope;
    this.expectContinue = expectContinue;
    this.body = req;
    this.clientSocket = req.socket;
  }

  start(): void {
    // docs/identity.md: a forward connection's process is looked up on its first request that needs it, then kept.
    const lookup = this.scope === undefined ? this.ctx.identity?.ready(this.clientSocket, this.ctx.store.current()) : undefined;
    if (lookup === undefined) this.evaluate();
    else lookup.then(() => this.evaluate(), (err: unknown) => this.fail(err));
  }

  evaluate(): void {
    let evaluation: Evaluation | undefined;
    try {
      evaluation = evaluateRequestCached(this.ctx, this.req, this.scope, this.o);
    } catch (err) {
      this.fail(err);
      return;
    }
    // Undefined only when a DNS query is needed; a cached answer relays in this same turn.
    if (evaluation !== undefined) this.relay(evaluation);
    else evaluateRequest(this.ctx, this.req, this.scope, this.o).then((e) => this.relay(e), (err: unknown) => this.fail(err));
  }

  refuseHeld(denial: Denial): void {
    lingerAfterAnswer(this.req, this.res);
    sendDenial(this.res, denial);
  }

  continueBody(): void {
    if (!this.expectContinue) return;
    this.expectContinue = false;
    this.res.writeContinue();
  }

  relay(evaluation: Evaluation): void {
    if (evaluation.kind === 'body') {
      holdInspectedBody(this, evaluation);
      return;
    }
    let answered: boolean;
    try {
      answered = this.relayEvaluated(evaluation);
    } catch (err) {
      this.fail(err);
      return;
    }
    if (answered) this.report();
  }

  /** True when the request is answered already; false when the upstream exchange (or the body) took it over. */
  private relayEvaluated(evaluation: Exclude<Evaluation, { kind: 'body' }>): boolean {
    const { ctx, res, o } = this;
    if (evaluation.kind === 'bare') {
      sendBareStatus(res, evaluation.status);
      return true;
    }
    if (evaluation.kind === 'deny') {
      // Never a 100 Continue for a refused request: the body is not read (SM-16).
      sendDenial(res, evaluation.denial);
      if (evaluation.finding !== undefined) ctx.sink.emit(findingEvent(o, evaluation.finding));
      return true;
    }
    const { framing } = evaluation;
    if (framing.upgrade !== undefined) {
      // Upgrade requests arrive through the 'upgrade' event; one here had no listener path: refuse.
      sendBareStatus(res, 400);
      return true;
    }
    const prepared = prepareHead(ctx, evaluation, o.method, this.req.rawHeaders);
    if (!prepared.ok) {
      this.refuse(prepared);
      return true;
    }
    const { head } = prepared;
    if (this.expectContinue) res.writeContinue();
    this.destination = evaluation;
    this.toolsList = toolsListPlan(ctx.store.current(), evaluation.decision, { host: evaluation.host, port: evaluation.port, path: o.path ?? '/' });
    const held = heldBody(ctx, { evaluation, prepared, req: this.req, body: this.body, method: o.method, hasBody: framing.hasBody, streamed: false });
    if (held !== undefined) {
      held.then(
        (body) => this.relayHeld(head, body),
        (err: unknown) => this.fail(err),
      );
      return false;
    }
    this.send(head, head.headers, framing.hasBody ? scannedBody(this.body) : null);
    return false;
  }

  private relayHeld(head: UpstreamHead, held: BodyResult | SignedResult): void {
    try {
      if (held.ok) {
        // OpenShell's "SigV4 re-signed" event, as fields of the request's one decision event (no key, no signature).
        if ('signed' in held) this.o.extra = { ...this.o.extra, sigv4: held.signed };
        this.send(head, held.headers, held.body);
        return;
      }
      this.refuse(held);
    } catch (err) {
      this.fail(err);
      return;
    }
    this.report();
  }

  private send(head: UpstreamHead, headers: string[], body: H1Request['body']): void {
    const { host, port, addresses } = this.destination as RelayEvaluation;
    const pool = this.scope === undefined ? this.ctx.upstreams.pool({ host, port, addresses, tls: false }) : this.scope.client;
    this.credentialScope = head.scope;
    const metrics = this.ctx.metrics;
    if (head.usedKeys > 0) metrics.credentialsSubstituted();
    metrics.requestBytes.observe(body === null ? 0 : Buffer.isBuffer(body) ? body.length : declaredLength(headers));
    this.sentAt = metrics.now();
    relays.set(this.res, this);
    this.res.on('close', onClientClose);
    try {
      const plan = this.toolsList;
      const upstream = plan === undefined ? headers : identityEncoding(headers);
      this.exchange = pool.request({ target: head.target, method: this.o.method, headers: upstream, body }, plan === undefined ? this : filteringHandler(this, plan));
    } catch (err) {
      this.onError(err instanceof Error ? err : new Error(String(err)));
    }
  }

  onHead(status: number, headers: string[], body: Buffer | undefined, complete: boolean): void {
    const res = this.res;
    this.o.status = status;
    observeSince(this.ctx.metrics, this.ctx.metrics.firstByteSeconds, this.sentAt);
    if (body !== undefined) this.responseBytes += body.length;
    try {
      res.writeHead(status, redactResponseHeaders(clientResponseHeaders(headers), this.credentialScope as CredentialScope));
    } catch (err) {
      const refused = new ResponseHeadError('response head refused', { cause: err });
      if (complete) this.onError(refused);
      else this.exchange?.abort(refused);
      return;
    }
    this.headSent = true;
    if (complete) {
      this.ctx.metrics.responseBytes.observe(this.responseBytes);
      this.finish();
      res.end(body);
    } else if (body !== undefined && !res.write(body)) this.pause();
    this.report();
  }

  onData(chunk: Buffer): void {
    this.responseBytes += chunk.length;
    if (!this.res.write(chunk)) this.pause();
  }

  onEnd(): void {
    this.ctx.metrics.responseBytes.observe(this.responseBytes);
    this.finish();
    this.res.end();
  }

  onError(err: Error): void {
    this.finish();
    if (this.headSent) {
      this.res.destroy();
      return;
    }
    // In a tunnel the client's close destroys the tunnel's upstream pool before `res` hears of it: the
    // exchange then fails as UPSTREAM_CLOSED, but it was the client that went.
    const clientGone = this.clientClosed || this.clientSocket.destroyed;
    this.upstreamFailed(clientGone && !(err instanceof ResponseHeadError) ? new ClientClosedError('client closed', { cause: err }) : err);
  }

  /** The exchange failed before any byte of the answer reached the client: it may still get a status. */
  private upstreamFailed(err: Error): void {
    try {
      this.answerFailure(err);
    } catch (thrown) {
      this.fail(thrown);
      return;
    }
    this.report();
  }

  private answerFailure(err: Error): void {
    const o = this.o;
    if (err instanceof ResponseHeadError) throw err.cause;
    const marker = markerError(err);
    if (marker !== undefined) {
      // The scanner stopped the body before the marker's bytes were released upstream (CR-12/13).
      this.refuse(marker.refusal);
      return;
    }
    if (err instanceof ClientClosedError) {
      // Issue 15: once the head went upstream the origin may act on it, so the event keeps the allow that sent
      // it (HTTP Activity, method and path); before that nothing left the boundary and the request failed.
      const verdict = this.exchange?.sent === true ? o.verdict : 'fail';
      settle(o, verdict, 'client-closed', 'client closed before upstream answered', o.status);
      return;
    }
    const dial = isDialError(err);
    settle(o, 'fail', dial ? 'dial-failed' : 'upstream-failed', err.message, 502);
    // RX-11: as on CONNECT, timeout, refused and unreachable stay apart in the event.
    if (dial) o.extra = { ...o.extra, dial_failure: dialFailureOf(err) };
    const { host, port } = this.destination as RelayEvaluation;
    sendDenial(this.res, upstreamUnreachableDenial(formatAuthority(host, port), dial ? 'connection failed' : 'upstream error'));
  }

  private refuse(refusal: RewriteRefusal): void {
    const { denial, finding } = credentialRefusal(this.o, refusal);
    // A response already under way cannot turn into a refusal: the connection is cut instead.
    lingerAfterAnswer(this.req, this.res);
    sendDenial(this.res, denial);
    if (finding !== undefined) this.ctx.sink.emit(findingEvent(this.o, finding));
  }

  /** Anything thrown on the way: a 502 while nothing was sent, else the connection is cut. */
  fail(err: unknown): void {
    const { res, o } = this;
    this.ctx.logger.warn({ err }, 'proxy request failed');
    settle(o, 'fail', 'upstream-failed', err instanceof Error ? err.message : String(err), o.status);
    if (!res.headersSent) sendBareStatus(res, 502);
    else res.destroy();
    this.report();
  }

  /** The one decision event of this request. */
  report(): void {
    if (this.reported) return;
    this.reported = true;
    emitOutcome(this.ctx.sink, this.ctx.metrics, this.o);
  }

  private pause(): void {
    this.exchange?.pause();
    if (this.waiting) return;
    this.waiting = true;
    this.res.once('drain', onClientDrain);
  }

  private finish(): void {
    this.settled = true;
    relays.delete(this.res);
    this.res.removeListener('close', onClientClose);
    if (this.waiting) this.res.removeListener('drain', onClientDrain);
  }
}
