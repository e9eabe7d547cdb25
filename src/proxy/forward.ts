// Relays one evaluated HTTP request (forward proxy or inside a tunnel) through h1-client.ts and streams the
// answer back; keep-alive on both sides. Emits the request's one decision event, the allow only after upstream answered.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RewriteRefusal } from '../credentials/outcome.js';
import type { CredentialScope } from '../credentials/scope.js';
import { BoundaryError } from '../errors.js';
import { formatAuthority } from '../net/host.js';
import { dialFailureOf } from './dial.js';
import type { ProxyContext } from './context.js';
import { credentialHead, credentialRefusal, MarkerInBodyError, redactResponseHeaders, rewrittenBody, scannedBody } from './credentials.js';
import { sendBareStatus, sendDenial, upstreamUnreachableDenial } from './deny.js';
import { beginOutcome, emitOutcome, findingEvent, type Outcome } from './events.js';
import type { H1Exchange, H1Handler, H1Pool } from './h1-client.js';
import type { H1Request } from './h1-request.js';
import { clientResponseHeaders, hostHeader, upstreamRequestHeaders } from './headers.js';
import { evaluateRequest } from './l7.js';

/** The marker scanner's abort, as thrown by the body iterator (or wrapped in `cause`). */
function markerError(err: unknown): MarkerInBodyError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    if (e instanceof MarkerInBodyError) return e;
  }
  return undefined;
}

function refuseRequest(ctx: ProxyContext, res: ServerResponse, o: Outcome, refusal: RewriteRefusal): void {
  const { denial, finding } = credentialRefusal(o, refusal);
  // A response already under way cannot turn into a refusal: the connection is cut instead.
  sendDenial(res, denial);
  if (finding !== undefined) ctx.sink.emit(findingEvent(o, finding));
}

function isDialError(err: unknown): boolean {
  return err instanceof BoundaryError && (err.code === 'UPSTREAM_CONNECT_TIMEOUT' || err.code === 'UPSTREAM_CONNECT_REFUSED' || err.code === 'UPSTREAM_UNREACHABLE');
}

/** The 'request' and 'checkContinue' handler of the shared HTTP server. */
export function createRequestHandler(ctx: ProxyContext) {
  return function handleProxyRequest(req: IncomingMessage, res: ServerResponse, expectContinue = false): void {
    const scope = ctx.scopes.get(req.socket);
    const o = beginOutcome(scope === undefined ? 'forward' : 'l7', 'http', req.socket);
    o.method = req.method ?? 'UNKNOWN';
    relay(ctx, req, res, o, expectContinue)
      .catch((err: unknown) => {
        ctx.logger.warn({ err }, 'proxy request failed');
        o.verdict = 'fail';
        o.reason = 'upstream-failed';
        o.detail = err instanceof Error ? err.message : String(err);
        if (!res.headersSent) sendBareStatus(res, 502);
        else res.destroy();
      })
      .finally(() => emitOutcome(ctx.sink, ctx.metrics, o));
  };
}

async function relay(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, o: Outcome, expectContinue: boolean): Promise<void> {
  const scope = ctx.scopes.get(req.socket);
  const evaluation = await evaluateRequest(ctx, req, scope, o);
  if (evaluation.kind === 'bare') {
    sendBareStatus(res, evaluation.status);
    return;
  }
  if (evaluation.kind === 'deny') {
    // Never a 100 Continue for a refused request: the body is not read (SM-16).
    sendDenial(res, evaluation.denial);
    if (evaluation.finding !== undefined) ctx.sink.emit(findingEvent(o, evaluation.finding));
    return;
  }
  const { host, port, target, addresses, tls, framing, decision } = evaluation;
  if (framing.upgrade !== undefined) {
    // Upgrade requests arrive through the 'upgrade' event; one here had no listener path: refuse.
    sendBareStatus(res, 400);
    return;
  }
  // Reference §4.4 step 5: the endpoint-scoped resolver and the rewrite come last, after the allow, and
  // nothing is awaited between them and the upstream write unless the body must be read first.
  const prepared = credentialHead({
    source: ctx.credentials,
    host,
    port,
    method: o.method,
    target,
    headers: upstreamRequestHeaders(req.rawHeaders, { host: hostHeader(host, port, tls) }),
    endpoint: decision.endpoint,
  });
  if (!prepared.ok) {
    refuseRequest(ctx, res, o, prepared);
    return;
  }
  const { head } = prepared;
  if (expectContinue) res.writeContinue();
  let headers = head.headers;
  let body: AsyncIterable<Buffer> | Buffer | null = null;
  if (framing.hasBody && decision.endpoint?.requestBodyCredentialRewrite === true) {
    const rewritten = await rewrittenBody(req, head);
    if (!rewritten.ok) {
      refuseRequest(ctx, res, o, rewritten);
      return;
    }
    ({ body, headers } = rewritten);
  } else if (framing.hasBody) {
    body = scannedBody(req);
  }
  const pool = scope === undefined ? ctx.upstreams.pool({ host, port, addresses, tls: false }) : scope.client;
  const exchange = streamResponse(pool, { target: head.target, method: o.method, headers, body }, res, o, head.scope);
  try {
    await exchange;
  } catch (err) {
    if (err instanceof ResponseHeadError) throw err.cause;
    const marker = markerError(err);
    if (marker !== undefined) {
      // The scanner stopped the body before the marker's bytes were released upstream (CR-12/13).
      refuseRequest(ctx, res, o, marker.refusal);
      return;
    }
    if (err instanceof ClientClosedError) {
      o.verdict = 'fail';
      o.reason = 'client-closed';
      o.detail = 'client closed before upstream answered';
      return;
    }
    const dial = isDialError(err);
    o.verdict = 'fail';
    o.reason = dial ? 'dial-failed' : 'upstream-failed';
    o.detail = err instanceof Error ? err.message : String(err);
    // RX-11: as on CONNECT, timeout, refused and unreachable stay apart in the event.
    if (dial) o.extra = { ...o.extra, dial_failure: dialFailureOf(err) };
    o.status = 502;
    sendDenial(res, upstreamUnreachableDenial(formatAuthority(host, port), dial ? 'connection failed' : 'upstream error'));
  }
}

/** The client went away before the upstream answered: the request is aborted, nothing is sent. */
class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
}

/** The client response head could not be written (e.g. a header value Node refuses). */
class ResponseHeadError extends Error {
  override readonly name = 'ResponseHeadError';
}

const RELAY = Symbol('boundary.relay');
type RelayedResponse = ServerResponse & { [RELAY]?: ResponseRelay | undefined };

// Shared listeners (`this` is the response): no closures per request.
function onClientClose(this: RelayedResponse): void {
  const relay = this[RELAY];
  if (relay === undefined || relay.settled) return;
  relay.clientClosed = true;
  relay.exchange?.abort(new ClientClosedError('client closed'));
}

function onClientDrain(this: RelayedResponse): void {
  const relay = this[RELAY];
  if (relay === undefined) return;
  relay.waiting = false;
  relay.exchange?.resume();
}

/**
 * Writes one upstream answer straight into `res`: a response that arrived whole in one read goes out as
 * writeHead + end(body), one client write. Backpressure pauses the upstream socket until `res` drains; a
 * client that goes away aborts the upstream exchange (its socket is destroyed, never reused).
 */
class ResponseRelay implements H1Handler {
  readonly res: RelayedResponse;
  readonly o: Outcome;
  readonly scope: CredentialScope;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  exchange: H1Exchange | undefined = undefined;
  headSent = false;
  settled = false;
  clientClosed = false;
  waiting = false;

  constructor(res: RelayedResponse, o: Outcome, scope: CredentialScope, resolve: () => void, reject: (err: unknown) => void) {
    this.res = res;
    this.o = o;
    this.scope = scope;
    this.resolve = resolve;
    this.reject = reject;
  }

  onHead(status: number, headers: string[], body: Buffer | undefined, complete: boolean): void {
    const res = this.res;
    this.o.status = status;
    try {
      res.writeHead(status, redactResponseHeaders(clientResponseHeaders(headers), this.scope));
    } catch (err) {
      const refused = new ResponseHeadError('response head refused', { cause: err });
      if (complete) this.onError(refused);
      else this.exchange?.abort(refused);
      return;
    }
    this.headSent = true;
    if (complete) {
      this.finish();
      res.end(body);
    } else if (body !== undefined && !res.write(body)) this.pause();
    this.resolve();
  }

  onData(chunk: Buffer): void {
    if (!this.res.write(chunk)) this.pause();
  }

  onEnd(): void {
    this.finish();
    this.res.end();
  }

  onError(err: Error): void {
    this.finish();
    if (this.headSent) this.res.destroy();
    else this.reject(this.clientClosed && !(err instanceof ResponseHeadError) ? new ClientClosedError('client closed', { cause: err }) : err);
  }

  private pause(): void {
    this.exchange?.pause();
    if (this.waiting) return;
    this.waiting = true;
    this.res.once('drain', onClientDrain);
  }

  private finish(): void {
    this.settled = true;
    this.res[RELAY] = undefined;
    this.res.removeListener('close', onClientClose);
    if (this.waiting) this.res.removeListener('drain', onClientDrain);
  }
}

/**
 * Sends one request and writes the answer into `res`. Resolves once the response head is written; rejects
 * only before that (nothing sent yet, so the caller may still answer 502). Errors after the head cut the
 * client connection, as a half-sent response cannot turn into an error status.
 */
function streamResponse(pool: H1Pool, request: H1Request, res: RelayedResponse, o: Outcome, scope: CredentialScope): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const relay = new ResponseRelay(res, o, scope, resolve, reject);
    res[RELAY] = relay;
    res.on('close', onClientClose);
    try {
      relay.exchange = pool.request(request, relay);
    } catch (err) {
      relay.onError(err instanceof Error ? err : new Error(String(err)));
    }
  });
}
