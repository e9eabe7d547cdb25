// One HTTP/2 stream of an inspected tunnel as one request: the HTTP/2 adapter. It reads the stream into the request
// chain (the same stages as HTTP/1.1), answers a refusal per h2-respond.ts, or relays the stream to the tunnel's upstream
// (h2-upstream.ts) with flow control and trailers both ways, the answer passing the response stages. One decision event.

import type { IncomingHttpHeaders } from 'node:http';
import { requestOutcome } from '../chain/event.js';
import { ChainRequest, type WireRequest } from '../chain/request.js';
import { parserRefusal } from '../chain/parser-refusal.js';
import type { Refusal } from '../chain/stage.js';
import { bufferHasMarker } from '../credentials/scan.js';
import { H2Error } from '../http2/frames.js';
import { isEnveloped, isGrpc } from '../http2/grpc.js';
import { joinedCookies, h2ResponseRegular } from '../http2/headers.js';
import { type H2Client, type H2Handler, UpstreamResetError } from '../http2/h2-client.js';
import { type H2RequestHead, readRequestHead } from '../http2/request-head.js';
import type { RequestStream, RequestStreamListener } from '../http2/request-stream.js';
import type { H1Exchange } from '../http1/h1-client.js';
import type { H2Tunnel, ProxyContext } from './context.js';
import { MarkerInBodyError } from '../chain/credential-injection.js';
import { emitOutcome, findingEvent } from '../chain/events.js';
import { fieldsByName, methodOf } from './h2-request.js';
import type { H2Lane } from './h2-lane.js';
import type { TunnelUpstream, TunnelUpstreamHandle } from './h2-upstream.js';
import { methodOverride } from '../chain/method-override.js';
import { respondDenial, respondStatus } from './h2-respond.js';
import { observeSince } from '../chain/timing.js';
import { CLIENT_CLOSED_DETAIL, ClientClosedError, failed, OverrideInTrailersError, upstreamFailure } from './relay-request.js';

/** What the HTTP/2 server keeps per client session (h2-server.ts). */
export interface H2Session {
  readonly tunnel: H2Tunnel;
  readonly upstream: TunnelUpstreamHandle;
}

/** The server session's onStream: one request per stream. */
export function handleH2Stream(ctx: ProxyContext, session: H2Session, stream: RequestStream): void {
  const read = readRequestHead(stream.fields, session.tunnel.target.tls ? 'https' : 'http', stream.remoteEnded);
  if (!read.ok) {
    // RFC 9113 §8.1.1: a malformed request is a stream error of type PROTOCOL_ERROR; there is no request to answer.
    const r = parserRefusal({
      adapter: 'l7',
      src: session.tunnel.src,
      tunnel: session.tunnel.target,
      h2: true,
      method: methodOf(stream.fields),
      reason: 'bad-request',
      status: undefined,
      parserError: read.problem,
      detail: `malformed HTTP/2 request: ${read.problem}`,
    });
    stream.reject();
    emitOutcome(ctx.sink, ctx.metrics, requestOutcome(r));
    return;
  }
  stream.contentLength = read.head.contentLength;
  new H2ProxyStream(ctx, session, stream, read.head).start();
}

/**
 * One stream: the request as the chain reads it (its wire head, and its body, which is the stream itself), the
 * upstream call's handler and the client stream's listener, in one object per stream.
 */
class H2ProxyStream implements H2Handler, RequestStreamListener, WireRequest, AsyncIterable<Buffer> {
  readonly ctx: ProxyContext;
  readonly session: H2Session;
  readonly stream: RequestStream;
  readonly head: H2RequestHead;
  readonly r: ChainRequest;
  readonly grpc: boolean;
  /** The client sent no body at all (END_STREAM on its HEADERS). */
  readonly endStream: boolean;
  private byName: IncomingHttpHeaders | undefined = undefined;
  exchange: H1Exchange | undefined = undefined;
  requestTrailers: string[] | undefined = undefined;
  /** The body goes upstream as it comes: trailers that come later are read when they come. */
  awaitingTrailers = false;
  /** The trailers were refused before the request went upstream: it never will. */
  trailersRefused: Error | undefined = undefined;
  /** The tunnel's lane to an HTTP/2 origin and the client it picked for this stream, until the stream ends. */
  lane: H2Lane | undefined = undefined;
  picked: H2Client | undefined = undefined;
  responseTrailers: string[] | undefined = undefined;
  relayTrailers = false;
  /** The client stream is full: the upstream is paused until it drains. */
  waiting = false;
  settled = false;
  reported = false;
  sentAt = 0;
  responseBytes = 0;

  constructor(ctx: ProxyContext, session: H2Session, stream: RequestStream, head: H2RequestHead) {
    this.ctx = ctx;
    this.session = session;
    this.stream = stream;
    this.head = head;
    this.grpc = isGrpc(head.contentType);
    this.endStream = stream.remoteEnded;
    this.r = new ChainRequest({
      adapter: 'l7',
      wire: this,
      hooks: this,
      tunnel: session.tunnel.target,
      src: session.tunnel.src,
      method: head.method,
      h2: true,
      upgradable: false,
      streamed: isEnveloped(head.contentType),
      bodyFollows: !stream.remoteEnded,
      body: this,
    });
  }

  get httpVersion(): string {
    return this.head.httpVersion;
  }

  get url(): string {
    return this.head.url;
  }

  get rawHeaders(): readonly string[] {
    return this.head.rawHeaders;
  }

  /** The fields by name, as a held body's checks read them; built only for a request whose body is held. */
  get headers(): IncomingHttpHeaders {
    this.byName ??= fieldsByName(this.head.rawHeaders);
    return this.byName;
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return this.stream;
  }

  start(): void {
    this.stream.listener = this;
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

  continueBody(): void {}

  goingUpstream(): boolean {
    // A body already read (held for inspection) goes up as read; else the stream has one unless END_STREAM came first.
    const hasBody = this.r.body !== this || !this.endStream;
    if (!hasBody) return false;
    const early = this.stream.trailers;
    if (this.r.body !== this) {
      // A held body's trailers came with it and are not relayed; an override among them is refused all the same.
      if (early !== undefined && methodOverride(early) !== undefined) this.trailersRefused = new OverrideInTrailersError();
      return true;
    }
    // Trailers that came while the request was decided are read now; later ones when they come.
    if (early !== undefined) this.onRequestTrailers(early);
    else this.awaitingTrailers = true;
    return true;
  }

  streamTrailers(trailers: string[]): void {
    if (this.awaitingTrailers) this.onRequestTrailers(trailers);
  }

  private decided(refused: Refusal | undefined): void {
    try {
      if (refused === undefined) this.send();
      else this.answer(refused);
    } catch (err) {
      this.fail(err);
    }
  }

  private answer(refused: Refusal): void {
    // Reported before the answer is written: writing it ends the stream, and that close must not be recorded as the
    // client's (a refusal after the destination stage, a credential one, read as client-closed).
    if (refused.finding !== undefined) this.ctx.sink.emit(findingEvent(requestOutcome(this.r), refused.finding));
    this.report();
    if (refused.denial === undefined) respondStatus(this.stream, refused.status ?? 400, this.grpc, refused.detail);
    else respondDenial(this.stream, refused.denial, this.grpc, this.ctx.peerPolicyHeader);
  }

  private onRequestTrailers(trailers: string[]): void {
    // A placeholder in a trailer would go upstream unsubstituted: refused like one in the body.
    if (bufferHasMarker(Buffer.from(trailers.join('\n'), 'latin1'))) this.refuseTrailers(new MarkerInBodyError());
    // docs/destinations.md#method-override-headers: an origin that reads an override from trailers would act on a
    // method that was never decided.
    else if (methodOverride(trailers) !== undefined) this.refuseTrailers(new OverrideInTrailersError());
    else this.requestTrailers = trailers;
  }

  /** The request fails with `err` now, or, while it has not gone upstream yet (a held body), when it would. */
  private refuseTrailers(err: Error): void {
    if (this.exchange !== undefined) this.exchange.abort(err);
    else this.trailersRefused = err;
  }

  private send(): void {
    const r = this.r;
    const head = r.head!;
    const headers = r.upstreamHeaders!;
    const body = r.upstreamBody ?? null;
    const metrics = this.ctx.metrics;
    if (head.usedKeys > 0) metrics.credentialsSubstituted();
    metrics.requestBytes.observe(body === null ? 0 : Buffer.isBuffer(body) ? body.length : 0);
    // Every stream after the tunnel's first finds its upstream chosen: no promise and no microtask per stream.
    const chosen = this.session.upstream.chosen();
    if (chosen !== undefined) {
      this.sendOn(chosen, headers, body);
      return;
    }
    this.session.upstream.get().then(
      (up) => this.sendOn(up, headers, body),
      (err: unknown) => this.onError(err instanceof Error ? err : new Error(String(err))),
    );
  }

  private sendOn(up: TunnelUpstream, headers: string[], body: Buffer | AsyncIterable<Buffer> | null): void {
    if (this.settled) return;
    if (this.trailersRefused !== undefined) {
      this.onError(this.trailersRefused);
      return;
    }
    this.sentAt = this.ctx.metrics.now();
    const r = this.r;
    const target = r.head!.target;
    const teTrailers = this.teTrailers();
    // Response trailers are relayed to a client that asked for them (`te: trailers`, as every gRPC client does) or
    // on a gRPC call; HTTP/1.1 origins have none this client reads. Elsewhere the answer ends on its last DATA frame.
    this.relayTrailers = up.kind === 'h2' && (teTrailers || this.grpc);
    const response = this.ctx.responses.handler(r, this, headers, (err) => this.exchange?.abort(err));
    const handler = response.handler as H2Handler;
    if (up.kind === 'h1') {
      this.exchange = up.pool.request({ method: r.method, target, headers: joinedCookies(response.headers), body }, handler);
      return;
    }
    const client = up.lane.pick();
    this.lane = up.lane;
    this.picked = client;
    const scheme = r.tunnel?.tls === true ? 'https' : 'http';
    // The client's head was checked as read: fields that go up unchanged are not checked again.
    const checkedFields = this.head.rawHeaders;
    this.exchange = client.request({ method: r.method, target, headers: response.headers, body, scheme, teTrailers, trailers: () => this.requestTrailers, checkedFields }, handler);
  }

  private teTrailers(): boolean {
    const raw = this.head.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) if (raw[i] === 'te') return true;
    return false;
  }

  onHead(status: number, headers: string[], body: Buffer | undefined, complete: boolean): void {
    const { stream, ctx } = this;
    this.r.upstream.status = status;
    observeSince(ctx.metrics, ctx.metrics.firstByteSeconds, this.sentAt);
    if (stream.destroyed) {
      this.exchange?.abort(new ClientClosedError(CLIENT_CLOSED_DETAIL));
      return;
    }
    stream.respondHead(status, h2ResponseRegular(headers), complete && body === undefined);
    if (body !== undefined) {
      this.responseBytes += body.length;
      if (!stream.write(body)) this.pause();
      if (complete) stream.end();
    }
    if (complete) this.finish(true);
    this.report();
  }

  onData(chunk: Buffer): void {
    this.responseBytes += chunk.length;
    if (!this.stream.destroyed && !this.stream.write(chunk)) this.pause();
  }

  onTrailers(trailers: string[]): void {
    this.responseTrailers = trailers;
  }

  onEnd(): void {
    this.finish(true);
    if (this.stream.destroyed) return;
    const trailers = this.relayTrailers && this.responseTrailers !== undefined ? h2ResponseRegular(this.responseTrailers) : undefined;
    this.stream.end(trailers);
  }

  onError(err: Error): void {
    const headSent = this.stream.headersSent;
    this.finish(false);
    if (headSent) {
      // A half-sent answer cannot turn into an error status: the stream is reset, with the origin's code if it reset.
      this.stream.reset(err instanceof UpstreamResetError ? err.rstCode : H2Error.INTERNAL_ERROR);
      return;
    }
    try {
      const cause = this.stream.destroyed && !(err instanceof MarkerInBodyError) ? new ClientClosedError(CLIENT_CLOSED_DETAIL, { cause: err }) : err;
      const refused = upstreamFailure(this.r, cause, this.exchange?.sent === true);
      if (refused !== undefined) this.answer(refused);
      else this.report();
    } catch (thrown) {
      this.fail(thrown);
    }
  }

  fail(err: unknown): void {
    this.ctx.logger.warn({ err }, 'proxy HTTP/2 stream failed');
    failed(this.r, err);
    this.finish(false);
    if (!this.stream.headersSent) respondStatus(this.stream, 502, this.grpc, 'upstream failed');
    else this.stream.reset(H2Error.INTERNAL_ERROR);
    this.report();
  }

  report(): void {
    if (this.reported) return;
    this.reported = true;
    emitOutcome(this.ctx.sink, this.ctx.metrics, requestOutcome(this.r));
  }

  streamClosed(): void {
    if (this.settled) return;
    this.exchange?.abort(new ClientClosedError(CLIENT_CLOSED_DETAIL));
    if (this.exchange === undefined) this.settled = true;
    // Nothing went upstream yet (a body still held, an upstream still being chosen): the event says so now.
    if (!this.reported && this.exchange === undefined && this.r.destination !== undefined) {
      this.r.settle({ verdict: 'fail', reason: 'client-closed', detail: CLIENT_CLOSED_DETAIL, status: this.r.upstream.status });
      this.report();
    }
  }

  private pause(): void {
    this.exchange?.pause();
    this.waiting = true;
  }

  streamDrained(): void {
    if (!this.waiting) return;
    this.waiting = false;
    this.exchange?.resume();
  }

  private finish(answered: boolean): void {
    if (this.settled) return;
    this.settled = true;
    if (this.picked !== undefined) {
      // The upstream stream has ended: it no longer counts against the tunnel's share.
      this.lane?.done(this.picked);
      this.picked = undefined;
    }
    if (answered) this.ctx.metrics.responseBytes.observe(this.responseBytes);
  }
}
