// Relays one evaluated HTTP request (forward proxy or inside a tunnel) through undici and streams the answer
// back; keep-alive on both sides. Emits the request's one decision event, the allow only after upstream answered.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { RewriteRefusal } from '../credentials/outcome.js';
import { BoundaryError } from '../errors.js';
import { formatAuthority } from '../net/host.js';
import { dialFailureOf } from './dial.js';
import type { ProxyContext } from './context.js';
import { credentialHead, credentialRefusal, MarkerInBodyError, redactResponseHeaders, rewrittenBody, scannedBody } from './credentials.js';
import { sendBareStatus, sendDenial, upstreamUnreachableDenial } from './deny.js';
import { beginOutcome, emitOutcome, findingEvent, type Outcome } from './events.js';
import { clientResponseHeaders, hostHeader, upstreamRequestHeaders } from './headers.js';
import { evaluateRequest } from './l7.js';

/** The marker scanner's abort, possibly wrapped by undici. */
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
  let body: Readable | Buffer | null = null;
  if (framing.hasBody && decision.endpoint?.requestBodyCredentialRewrite === true) {
    const rewritten = await rewrittenBody(req, head);
    if (!rewritten.ok) {
      refuseRequest(ctx, res, o, rewritten);
      return;
    }
    ({ body, headers } = rewritten);
  } else if (framing.hasBody) {
    body = Readable.from(scannedBody(req), { objectMode: false });
  }
  const dispatcher: Dispatcher = scope === undefined ? ctx.upstreams.pool({ host, port, addresses, tls: false }) : scope.client;
  const exchange = streamResponse(dispatcher, { path: head.target, method: o.method as Dispatcher.HttpMethod, headers, body }, res, o, head.scope);
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

/**
 * Dispatches one request and writes the answer straight into `res` (undici's handler API, no intermediate
 * Readable, pipeline or AbortController): backpressure pauses the upstream read until `res` drains, and a
 * client that goes away aborts the upstream request. Resolves once the response head is written; rejects
 * only before that (nothing sent yet, so the caller may still answer 502). Errors after the head cut the
 * client connection, as a half-sent response cannot turn into an error status.
 */
function streamResponse(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  res: ServerResponse,
  o: Outcome,
  credentialScope: Parameters<typeof redactResponseHeaders>[1],
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let controller: Dispatcher.DispatchController | undefined;
    let headSent = false;
    let settled = false;
    let clientClosed = false;
    function finish(): void {
      settled = true;
      res.removeListener('close', onClose);
      res.removeListener('drain', onDrain);
    }
    function onClose(): void {
      if (settled) return;
      clientClosed = true;
      controller?.abort(new ClientClosedError('client closed'));
    }
    function onDrain(): void {
      controller?.resume();
    }
    res.on('close', onClose);
    res.on('drain', onDrain);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (clientClosed) c.abort(new ClientClosedError('client closed'));
      },
      onResponseStart(c, statusCode, upstreamHeaders) {
        // 1xx interim answers end at boundary (request() dropped them too).
        if (statusCode < 200) return;
        o.status = statusCode;
        try {
          res.writeHead(statusCode, redactResponseHeaders(clientResponseHeaders(upstreamHeaders), credentialScope));
        } catch (err) {
          c.abort(new ResponseHeadError('response head refused', { cause: err }));
          return;
        }
        headSent = true;
        resolve();
      },
      onResponseData(c, chunk) {
        if (!res.write(chunk)) c.pause();
      },
      onResponseEnd() {
        finish();
        res.end();
      },
      onResponseError(_c, err) {
        finish();
        if (headSent) res.destroy();
        else reject(clientClosed && !(err instanceof ResponseHeadError) ? new ClientClosedError('client closed', { cause: err }) : err);
      },
    };
    dispatcher.dispatch(options, handler);
  });
}
