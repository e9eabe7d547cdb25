// One HTTP/2 stream of an inspected tunnel as one request: the same evaluator as HTTP/1.1 (l7.ts), the same
// credential rewrite and body rules (credential-injection.ts), one decision event, then the stream relayed to the
// tunnel's upstream (h2-upstream.ts) with flow control and trailers both ways. Denials go out per h2-respond.ts.

import type { CredentialScope } from '../credentials/scope.js';
import { bufferHasMarker } from '../credentials/scan.js';
import { H2Error } from '../http2/frames.js';
import { isEnveloped, isGrpc } from '../http2/grpc.js';
import { joinedCookies, h2ResponseFields } from '../http2/headers.js';
import { type H2Client, type H2Handler, UpstreamResetError } from '../http2/h2-client.js';
import { type H2RequestHead, readRequestHead } from '../http2/request-head.js';
import type { RequestStream } from '../http2/request-stream.js';
import type { H1Exchange } from '../http1/h1-client.js';
import type { H2Tunnel, ProxyContext, TunnelTarget } from './context.js';
import { MarkerInBodyError, redactResponseHeaders, type UpstreamHead } from './credential-injection.js';
import type { Denial } from './deny.js';
import { beginOutcome, emitOutcome, type Outcome, settle } from './events.js';
import type { HeldRequest } from './body-hold.js';
import { H2StreamRequest, methodOf } from './h2-request.js';
import { redactingHandler, redactsResponse } from './response-redaction.js';
import { filteringHandler, identityEncoding, type ToolsListPlan } from './tools-list-filter.js';
import type { H2Lane } from './h2-lane.js';
import type { TunnelUpstream, TunnelUpstreamHandle } from './h2-upstream.js';
import { respondDenial, respondStatus } from './h2-respond.js';
import type { Evaluation, RelayEvaluation } from './l7.js';
import { observeSince } from './metrics.js';
import { methodOverride } from './method-override.js';
import {
  answerUpstreamFailure,
  type BodyFraming,
  ClientClosedError,
  evaluateAndRelay,
  OverrideInTrailersError,
  type RelayingRequest,
  relayEvaluation,
  type UpstreamBody,
} from './relay-request.js';

const H2_EXTRA = Object.freeze({ http_version: '2' });

/** What the HTTP/2 server keeps per client session (h2-server.ts). */
export interface H2Session {
  readonly tunnel: H2Tunnel;
  readonly upstream: TunnelUpstreamHandle;
}

/** The server session's onStream: one request per stream. */
export function handleH2Stream(ctx: ProxyContext, session: H2Session, stream: RequestStream): void {
  const o = beginOutcome('l7', 'http', session.tunnel.src);
  const read = readRequestHead(stream.fields, session.tunnel.target.tls ? 'https' : 'http', stream.remoteEnded);
  if (!read.ok) {
    // RFC 9113 §8.1.1: a malformed request is a stream error of type PROTOCOL_ERROR; there is no request to answer.
    o.method = methodOf(stream.fields);
    settle(o, 'deny', 'bad-request', `malformed HTTP/2 request: ${read.problem}`, undefined);
    o.extra = H2_EXTRA;
    stream.reject();
    emitOutcome(ctx.sink, ctx.metrics, o);
    return;
  }
  o.method = read.head.method;
  stream.contentLength = read.head.contentLength;
  new H2ProxyStream(ctx, session, stream, read.head, o).start();
}

class H2ProxyStream implements H2Handler, RelayingRequest {
  readonly ctx: ProxyContext;
  readonly session: H2Session;
  readonly stream: RequestStream;
  readonly head: H2RequestHead;
  readonly o: Outcome;
  readonly scope: TunnelTarget;
  readonly req: HeldRequest;
  readonly grpc: boolean;
  /** The client sent no body at all (END_STREAM on its HEADERS). */
  readonly endStream: boolean;
  body: AsyncIterable<Buffer>;
  destination: RelayEvaluation | undefined = undefined;
  credentialScope: CredentialScope | undefined = undefined;
  exchange: H1Exchange | undefined = undefined;
  requestTrailers: string[] | undefined = undefined;
  /** The trailers were refused before the request went upstream: it never will. */
  trailersRefused: Error | undefined = undefined;
  responseTrailers: string[] | undefined = undefined;
  relayTrailers = false;
  /** The tools/list answers to filter (mcp.filter_tools_list), once the request is allowed. */
  toolsList: ToolsListPlan | undefined = undefined;
  /** The tunnel's lane to an HTTP/2 origin and the client it picked for this stream, until the stream ends. */
  lane: H2Lane | undefined = undefined;
  picked: H2Client | undefined = undefined;
  /** The client stream is full: the upstream is paused until it drains. */
  waiting = false;
  settled = false;
  reported = false;
  sentAt = 0;
  responseBytes = 0;

  constructor(ctx: ProxyContext, session: H2Session, stream: RequestStream, head: H2RequestHead, o: Outcome) {
    this.ctx = ctx;
    this.session = session;
    this.stream = stream;
    this.head = head;
    this.o = o;
    this.scope = session.tunnel.target;
    this.grpc = isGrpc(head.contentType);
    this.endStream = stream.remoteEnded;
    this.req = new H2StreamRequest(head, stream);
    this.body = this.req;
  }

  start(): void {
    this.stream.onClose = () => this.clientClosed();
    this.stream.onDrain = () => this.drained();
    evaluateAndRelay(this);
  }

  relay(evaluation: Evaluation): void {
    relayEvaluation(this, evaluation);
  }

  refuseHeld(denial: Denial): void {
    respondDenial(this.stream, denial, this.grpc);
  }

  answerDenial(denial: Denial): void {
    respondDenial(this.stream, denial, this.grpc);
  }

  answerStatus(status: number): void {
    respondStatus(this.stream, status, this.grpc, this.o.detail);
  }

  continueBody(): void {}

  bodyFraming(): BodyFraming {
    // A body already read (held for inspection) goes up as read; else the stream has one unless END_STREAM came first.
    return { hasBody: this.body !== this.req || !this.endStream, streamed: isEnveloped(this.head.contentType) };
  }

  goingUpstream(framing: BodyFraming): void {
    if (!framing.hasBody) return;
    const early = this.stream.trailers;
    if (this.body !== this.req) {
      // A held body's trailers came with it and are not relayed; an override among them is refused all the same.
      if (early !== undefined && methodOverride(early) !== undefined) this.trailersRefused = new OverrideInTrailersError();
      return;
    }
    // Trailers that came while the request was decided are read now; later ones when they come.
    if (early !== undefined) this.onRequestTrailers(early);
    else this.stream.onTrailers = (trailers) => this.onRequestTrailers(trailers);
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

  send(head: UpstreamHead, headers: string[], body: UpstreamBody): void {
    this.credentialScope = head.scope;
    const metrics = this.ctx.metrics;
    if (head.usedKeys > 0) metrics.credentialsSubstituted();
    metrics.requestBytes.observe(body === null ? 0 : Buffer.isBuffer(body) ? body.length : 0);
    // Every stream after the tunnel's first finds its upstream chosen: no promise and no microtask per stream.
    const chosen = this.session.upstream.chosen();
    if (chosen !== undefined) {
      this.sendOn(chosen, head, headers, body);
      return;
    }
    this.session.upstream.get().then(
      (up) => this.sendOn(up, head, headers, body),
      (err: unknown) => this.onError(err instanceof Error ? err : new Error(String(err))),
    );
  }

  private sendOn(up: TunnelUpstream, head: UpstreamHead, headers: string[], body: UpstreamBody): void {
    if (this.settled) return;
    if (this.trailersRefused !== undefined) {
      this.onError(this.trailersRefused);
      return;
    }
    this.sentAt = this.ctx.metrics.now();
    const { method } = this.o;
    const teTrailers = this.teTrailers();
    // Response trailers are relayed to a client that asked for them (`te: trailers`, as every gRPC client does) or
    // on a gRPC call; HTTP/1.1 origins have none this client reads. Elsewhere the answer ends on its last DATA frame.
    this.relayTrailers = up.kind === 'h2' && (teTrailers || this.grpc);
    // docs/policy.md#filtering-toolslist: the answer passes through the same filter as on HTTP/1.1.
    const plan = this.toolsList;
    // docs/credentials.md#echoed-secrets: closest to the client, after the tools/list filter has re-encoded its JSON.
    const redacting = redactsResponse(head.scope);
    const upstream = plan === undefined && !redacting ? headers : identityEncoding(headers);
    const base: H2Handler = redacting ? redactingHandler(this, { ctx: this.ctx, o: this.o, scope: head.scope, abort: (err) => this.exchange?.abort(err) }) : this;
    const handler: H2Handler = plan === undefined ? base : { ...filteringHandler(base, plan), onTrailers: (t) => base.onTrailers(t) };
    if (up.kind === 'h1') {
      this.exchange = up.pool.request({ method, target: head.target, headers: joinedCookies(upstream), body }, handler);
      return;
    }
    const client = up.lane.pick();
    this.lane = up.lane;
    this.picked = client;
    this.exchange = client.request({ method, target: head.target, headers: upstream, body, scheme: this.scope.tls ? 'https' : 'http', teTrailers, trailers: () => this.requestTrailers }, handler);
  }

  private teTrailers(): boolean {
    const raw = this.head.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) if (raw[i] === 'te') return true;
    return false;
  }

  onHead(status: number, headers: string[], body: Buffer | undefined, complete: boolean): void {
    const { stream, ctx } = this;
    this.o.status = status;
    observeSince(ctx.metrics, ctx.metrics.firstByteSeconds, this.sentAt);
    if (stream.destroyed) {
      this.exchange?.abort(new ClientClosedError('client closed'));
      return;
    }
    const redacted = redactResponseHeaders(headers, this.credentialScope as CredentialScope);
    stream.respond(h2ResponseFields(status, redacted), complete && body === undefined);
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
    this.responseTrailers = redactResponseHeaders(trailers, this.credentialScope as CredentialScope);
  }

  onEnd(): void {
    this.finish(true);
    if (this.stream.destroyed) return;
    const trailers = this.relayTrailers && this.responseTrailers !== undefined ? h2ResponseFields(undefined, this.responseTrailers) : undefined;
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
      answerUpstreamFailure(this, this.stream.destroyed && !(err instanceof MarkerInBodyError) ? new ClientClosedError('client closed', { cause: err }) : err);
    } catch (thrown) {
      this.fail(thrown);
      return;
    }
    this.report();
  }

  fail(err: unknown): void {
    this.ctx.logger.warn({ err }, 'proxy HTTP/2 stream failed');
    settle(this.o, 'fail', 'upstream-failed', err instanceof Error ? err.message : String(err), this.o.status);
    this.finish(false);
    if (!this.stream.headersSent) respondStatus(this.stream, 502, this.grpc, 'upstream failed');
    else this.stream.reset(H2Error.INTERNAL_ERROR);
    this.report();
  }

  report(): void {
    if (this.reported) return;
    this.reported = true;
    const o = this.o;
    o.extra = o.extra === undefined ? H2_EXTRA : { ...o.extra, http_version: '2' };
    emitOutcome(this.ctx.sink, this.ctx.metrics, o);
  }

  private clientClosed(): void {
    if (this.settled) return;
    this.exchange?.abort(new ClientClosedError('client closed'));
    if (this.exchange === undefined) this.settled = true;
    // Nothing went upstream yet (a body still held, an upstream still being chosen): the event says so now.
    if (!this.reported && this.exchange === undefined && this.destination !== undefined) {
      settle(this.o, 'fail', 'client-closed', 'client closed before upstream answered', this.o.status);
      this.report();
    }
  }

  private pause(): void {
    this.exchange?.pause();
    this.waiting = true;
  }

  private drained(): void {
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
