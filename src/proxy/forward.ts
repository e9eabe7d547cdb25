// Relays one evaluated HTTP request (forward proxy or inside a tunnel) through http1/h1-client.ts and streams the
// answer back; keep-alive on both sides. Emits the request's one decision event: the allow once upstream answered,
// or once the client left after the head went upstream (issue 15).

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { CredentialScope } from '../credentials/scope.js';
import type { ProxyContext, TunnelScope } from './context.js';
import { redactResponseHeaders, type UpstreamHead } from './credential-injection.js';
import { type Denial, lingerAfterAnswer, sendBareStatus, sendDenial } from './deny.js';
import { beginOutcome, emitOutcome, type Outcome, settle } from './events.js';
import { observeSince } from './metrics.js';
import type { H1Exchange, H1Handler } from '../http1/h1-client.js';
import { clientResponseHeaders } from '../http1/headers.js';
import type { Evaluation, RelayEvaluation } from './l7.js';
import { answerUpstreamFailure, type BodyFraming, ClientClosedError, evaluateAndRelay, type RelayingRequest, relayEvaluation, type UpstreamBody } from './relay-request.js';
import { redactingHandler, redactsResponse } from './response-redaction.js';
import { filteringHandler, identityEncoding, type ToolsListPlan } from './tools-list-filter.js';

/** The 'request' and 'checkContinue' handler of the shared HTTP server. */
export function createRequestHandler(ctx: ProxyContext) {
  return function handleProxyRequest(req: IncomingMessage, res: ServerResponse, expectContinue = false): void {
    const scope = ctx.scopes.get(req.socket);
    const o = beginOutcome(scope === undefined ? 'forward' : 'l7', 'http', req.socket);
    o.method = req.method ?? 'UNKNOWN';
    new ForwardedRequest(ctx, req, res, o, scope, expectContinue).start();
  };
}

/** Content-Length of a flat `[name, value, ...]` list; 0 when absent (a chunked body's size is not known up front). */
function declaredLength(headers: readonly string[]): number {
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] ?? '').toLowerCase() === 'content-length') return Number(headers[i + 1]) || 0;
  }
  return 0;
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
class ForwardedRequest implements H1Handler, RelayingRequest {
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
    this.evaluate();
  }

  evaluate(): void {
    evaluateAndRelay(this);
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
    relayEvaluation(this, evaluation);
  }

  answerStatus(status: number): void {
    sendBareStatus(this.res, status);
  }

  answerDenial(denial: Denial): void {
    sendDenial(this.res, denial);
  }

  bodyFraming(evaluation: RelayEvaluation): BodyFraming | undefined {
    const { framing } = evaluation;
    if (framing.upgrade !== undefined) {
      // Upgrade requests arrive through the 'upgrade' event; one here had no listener path: refuse.
      sendBareStatus(this.res, 400);
      return undefined;
    }
    return { hasBody: framing.hasBody, streamed: false };
  }

  goingUpstream(): void {
    if (this.expectContinue) this.res.writeContinue();
  }

  send(head: UpstreamHead, headers: string[], body: UpstreamBody): void {
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
      // docs/credentials.md#echoed-secrets: closest to the client, after the tools/list filter has re-encoded its JSON.
      const redacting = redactsResponse(head.scope);
      const upstream = plan === undefined && !redacting ? headers : identityEncoding(headers);
      const handler: H1Handler = redacting ? redactingHandler(this, { ctx: this.ctx, o: this.o, scope: head.scope, abort: (err) => this.exchange?.abort(err) }) : this;
      this.exchange = pool.request({ target: head.target, method: this.o.method, headers: upstream, body }, plan === undefined ? handler : filteringHandler(handler, plan));
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
      if (err instanceof ResponseHeadError) throw err.cause;
      answerUpstreamFailure(this, err);
    } catch (thrown) {
      this.fail(thrown);
      return;
    }
    this.report();
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
