// The HTTP/1.1 adapter (forward proxy, and every request inside an inspected HTTP/1.1 tunnel): reads a request into the
// request chain, answers its refusal, or relays it through http1/h1-client.ts and streams the answer back through the
// response stages; keep-alive on both sides. Emits the request's one decision event: once upstream answered, or once
// the client left after the head went upstream (issue 15).

import type { Socket } from 'node:net';
import { requestOutcome } from '../chain/event.js';
import { ChainRequest } from '../chain/request.js';
import type { Refusal } from '../chain/stage.js';
import type { H1Exchange, H1Handler } from '../http1/h1-client.js';
import type { ClientError, H1Answer, H1IncomingRequest } from '../http1/h1-server.js';
import { clientResponseHeaders } from '../http1/headers.js';
import type { ProxyContext, TunnelScope } from './context.js';
import { lingerAfterAnswer, sendBareStatus, sendDenial } from './answer.js';
import { emitOutcome, findingEvent } from '../chain/events.js';
import { observeSince } from '../chain/timing.js';
import { CLIENT_CLOSED_DETAIL, ClientClosedError, failed, upstreamFailure } from './relay-request.js';


/** The request handler of the shared HTTP/1.1 server (http1/h1-server.ts); `expectContinue`: the client waits for 100. */
export function createRequestHandler(ctx: ProxyContext) {
  return function handleProxyRequest(req: H1IncomingRequest, res: H1Answer, expectContinue = false): void {
    new ForwardedRequest(ctx, req, res, ctx.scopes.get(req.socket), expectContinue).start();
  };
}

/** Content-Length of a flat `[name, value, ...]` list; 0 when absent (a chunked body's size is not known up front). */
function declaredLength(headers: readonly string[]): number {
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] ?? '').toLowerCase() === 'content-length') return Number(headers[i + 1]) || 0;
  }
  return 0;
}

/** The event's detail for a request whose body ended early, by `cutShortBy`'s code. */
function cutShortDetail(cause: ClientError): string {
  if (cause.code === 'ECONNRESET') return CLIENT_CLOSED_DETAIL;
  if (cause.code === 'HPE_INVALID_EOF_STATE') return 'client closed before its request body ended';
  if (cause.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request body not received within the request deadline';
  return `request body refused by the HTTP/1.1 parser: ${cause.code ?? 'HPE_UNKNOWN'}`;
}

/** The client response head could not be written (e.g. a header value Node refuses). */
class ResponseHeadError extends Error {
  override readonly name = 'ResponseHeadError';
}

/**
 * One request from the chain to its decision event, and the handler of its upstream exchange. The chain runs in the
 * turn the request arrived in unless a stage must wait (a DNS answer, a held body). Every path ends in report(); an
 * exception on any path becomes a 502 (or a cut connection once the head is out) via fail().
 *
 * Upstream answer: a response that arrived whole in one read goes out as writeHead + end(body), one client write.
 * Backpressure pauses the upstream socket until `res` drains; a client that goes away aborts the upstream exchange
 * (its socket is destroyed, never reused). Errors after the head cut the client connection.
 */
class ForwardedRequest implements H1Handler {
  readonly ctx: ProxyContext;
  readonly req: H1IncomingRequest;
  readonly res: H1Answer;
  readonly r: ChainRequest;
  readonly scope: TunnelScope | undefined;
  /** Cleared once the 100 Continue went out (an inspected body is read before the decision). */
  expectContinue: boolean;
  /** A stage started reading the body: a refusal must let the rest of it arrive and be dropped. */
  bodyWanted = false;
  /** The client connection, kept: `req.socket` is let go of once the exchange is over. */
  readonly clientSocket: Socket;
  exchange: H1Exchange | undefined = undefined;
  headSent = false;
  /** The upstream exchange is over (or never started): a client close no longer aborts it. */
  settled = false;
  clientClosed = false;
  waiting = false;
  /** Resumes the upstream once `res` drained; made at the first backpressure. */
  private onDrain: (() => void) | undefined = undefined;
  reported = false;
  /** metrics.now() when the request went upstream, and the response body bytes relayed so far. */
  sentAt = 0;
  responseBytes = 0;

  constructor(ctx: ProxyContext, req: H1IncomingRequest, res: H1Answer, scope: TunnelScope | undefined, expectContinue: boolean) {
    this.ctx = ctx;
    this.req = req;
    this.res = res;
    this.scope = scope;
    this.expectContinue = expectContinue;
    this.clientSocket = req.socket;
    this.r = new ChainRequest({
      adapter: scope === undefined ? 'forward' : 'l7',
      wire: req,
      hooks: this,
      tunnel: scope,
      src: req.peer,
      method: req.method ?? 'UNKNOWN',
      h2: false,
      upgradable: false,
      body: req,
    });
  }

  start(): void {
    let out: Refusal | undefined | Promise<Refusal | undefined>;
    try {
      out = this.ctx.chain.run(this.r);
    } catch (err) {
      this.fail(err);
      return;
    }
    if (out instanceof Promise) out.then((refused) => this.decided(refused), (err: unknown) => this.fail(err));
    else this.decided(out);
  }

  continueBody(): void {
    this.bodyWanted = true;
    if (!this.expectContinue) return;
    this.expectContinue = false;
    this.res.writeContinue();
  }

  goingUpstream(): boolean {
    this.bodyWanted = true;
    if (this.expectContinue) {
      this.expectContinue = false;
      this.res.writeContinue();
    }
    return this.r.framing?.hasBody === true;
  }

  private decided(refused: Refusal | undefined): void {
    try {
      if (refused === undefined) this.send();
      else this.answer(refused);
    } catch (err) {
      this.fail(err);
    }
  }

  /** A refusal in HTTP/1.1 terms; never a 100 Continue for it (SM-16), and a body still arriving is read and dropped. */
  private answer(refused: Refusal): void {
    if (this.bodyWanted) lingerAfterAnswer(this.req, this.res);
    if (refused.denial === undefined) sendBareStatus(this.res, refused.status ?? 400);
    else sendDenial(this.res, refused.denial, this.ctx.peerPolicyHeader);
    if (refused.finding !== undefined) this.ctx.sink.emit(findingEvent(requestOutcome(this.r), refused.finding));
    this.report();
  }

  private send(): void {
    const r = this.r;
    const { host, port } = r as { host: string; port: number };
    const head = r.head!;
    const body = r.upstreamBody ?? null;
    const headers = r.upstreamHeaders!;
    const pool = this.scope === undefined ? this.ctx.upstreams.pool({ host, port, addresses: r.destination!.addresses, tls: false }) : this.scope.client;
    const metrics = this.ctx.metrics;
    if (head.usedKeys > 0) metrics.credentialsSubstituted();
    metrics.requestBytes.observe(body === null ? 0 : Buffer.isBuffer(body) ? body.length : declaredLength(headers));
    this.sentAt = metrics.now();
    // Left on `res` once the exchange is over (it does nothing then): a closure is cheaper than a lookup table
    // of relays and a removeListener per request.
    this.res.on('close', () => this.clientGone());
    try {
      const response = this.ctx.responses.handler(r, this, headers, (err) => this.exchange?.abort(err));
      this.exchange = pool.request({ target: head.target, method: r.method, headers: response.headers, body }, response.handler);
    } catch (err) {
      this.onError(err instanceof Error ? err : new Error(String(err)));
    }
  }

  onHead(status: number, headers: string[], body: Buffer | undefined, complete: boolean): void {
    const res = this.res;
    this.r.upstream.status = status;
    observeSince(this.ctx.metrics, this.ctx.metrics.firstByteSeconds, this.sentAt);
    if (body !== undefined) this.responseBytes += body.length;
    try {
      res.writeHead(status, clientResponseHeaders(headers));
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
    const cutShortBy = this.req.cutShortBy;
    if (cutShortBy !== undefined) {
      this.cutShort(err, cutShortBy);
      return;
    }
    // In a tunnel the client's close destroys the tunnel's upstream pool before `res` hears of it: the
    // exchange then fails as UPSTREAM_CLOSED, but it was the client that went.
    const clientGone = this.clientClosed || this.clientSocket.destroyed;
    const cause = clientGone && !(err instanceof ResponseHeadError) ? new ClientClosedError(CLIENT_CLOSED_DETAIL, { cause: err }) : err;
    try {
      if (cause instanceof ResponseHeadError) throw cause.cause;
      const refused = upstreamFailure(this.r, cause, this.exchange?.sent === true);
      if (refused !== undefined) this.answer(refused);
      else this.report();
    } catch (thrown) {
      this.fail(thrown);
    }
  }

  /** Anything thrown on the way: a 502 while nothing was sent, else the connection is cut. */
  fail(err: unknown): void {
    const res = this.res;
    const cutShortBy = this.req.cutShortBy;
    if (cutShortBy !== undefined) {
      this.cutShort(err, cutShortBy);
      return;
    }
    this.ctx.logger.warn({ err }, 'proxy request failed');
    failed(this.r, err);
    if (!res.headersSent) sendBareStatus(res, 502);
    else res.destroy();
    this.report();
  }

  /**
   * The client's side ended the body early (server-connection.ts), and the exchange or the stage reading the body
   * heard of it: not boundary's failure. The event says why; nothing answers, and a connection still open (half-closed,
   * or past bytes the parser refused) closes rather than wait for an answer that will not come.
   */
  private cutShort(err: unknown, cutShortBy: ClientError): void {
    upstreamFailure(this.r, new ClientClosedError(cutShortDetail(cutShortBy), { cause: err }), this.exchange?.sent === true);
    this.res.destroy();
    this.report();
  }

  /** The one decision event of this request. */
  report(): void {
    if (this.reported) return;
    this.reported = true;
    emitOutcome(this.ctx.sink, this.ctx.metrics, requestOutcome(this.r));
  }

  /** The client went away: an upstream exchange still running is aborted. */
  private clientGone(): void {
    if (this.settled) return;
    this.clientClosed = true;
    this.exchange?.abort(new ClientClosedError(CLIENT_CLOSED_DETAIL));
  }

  private pause(): void {
    this.exchange?.pause();
    if (this.waiting) return;
    this.waiting = true;
    this.onDrain ??= () => {
      this.waiting = false;
      this.exchange?.resume();
    };
    this.res.once('drain', this.onDrain);
  }

  private finish(): void {
    this.settled = true;
    if (this.waiting && this.onDrain !== undefined) this.res.removeListener('drain', this.onDrain);
  }
}
