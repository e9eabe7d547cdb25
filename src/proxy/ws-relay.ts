// The inspected WebSocket relay after an allowed 101 (docs/destinations.md#websocket-relay, docs/credentials.md#substitution-slots, docs/credentials.md#inspectable-routes-only): client frames are
// parsed, each text message decided as WEBSOCKET_TEXT, passed through the network middlewares its upgrade selected,
// and credential-rewritten or refused with close 1008.
// Server bytes pass through untouched; only their frame headers are followed, to place our own close frame.
//
// Events: allowed text messages emit nothing (one event per message would flood the log). A denied or
// audited text message emits HTTP:WEBSOCKET_TEXT (HTTP Activity, status_detail `FORWARD|L7_REQUEST
// denied|audit`, the upgrade's host/port/path, unmapped rule, endpoint, reason_code and close_code 1008 on
// a deny); a refused placeholder the same with the credential reason; a refused binary frame
// HTTP:WEBSOCKET_BINARY; malformed frames and assembly timeouts NET:CLOSE with reason_code and close_code.

import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { rewriteWebSocketText } from '../credentials/rewrite-ws.js';
import type { CredentialScope } from '../credentials/scope.js';
import { classifyGraphqlWsMessage } from '../graphql/ws-message.js';
import { hasGraphqlPolicy } from '../policy/decide-graphql.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import { decide } from '../policy/decide.js';
import type { Adapter, Endpoint } from '../policy/types.js';
import type { Severity } from '../telemetry/event.js';
import type { ProxyContext } from './context.js';
import { credentialRefusal } from '../chain/credential-injection.js';
import { inspectionRefusalDetail } from '../chain/denials.js';
import { beginOutcome, emitOutcome, engineOf, findingEvent, type Outcome, type OutcomeReason, settle } from '../chain/events.js';
import { identityFields } from '../chain/identity-gate.js';
import { notable, runTextMiddlewares, type TextMiddlewareResult } from '../chain/websocket-middleware.js';
import type { BoundMiddleware } from '../middleware/implementation.js';
import { invocationFields } from '../middleware/outcome.js';
import { TUNNEL_LINGER_MS } from './tunnel.js';
import { createStepQueue } from './ws-steps.js';
import { createAssemblyTimer, GLOBAL_TIMERS, type Timers } from '../websocket/assembly-timer.js';
import { createFrameBoundaryTracker } from '../websocket/frame-boundary.js';
import { CLOSE_CODES, type ClientEvent, type CloseCode, createClientFrameParser, encodeClose, encodeFrame, OPCODES } from '../websocket/ws-frames.js';

/** What the relay needs to know about the upgrade it continues. */
export interface WsSession {
  readonly adapter: Adapter;
  readonly host: string;
  readonly port: number;
  /** `https` when the upgrade came through a TLS-terminated tunnel: its messages' events say so. */
  readonly scheme: 'http' | 'https';
  /** Redacted canonical path and query of the upgrade request: what WEBSOCKET_TEXT rules match against. */
  readonly path: string;
  readonly query: string;
  readonly endpoint: Endpoint | undefined;
  /** Decide each text message (a websocket endpoint); false on a credentialed L4 route (markers only). */
  readonly decideText: boolean;
  /** The upgrade's endpoint-scoped resolver (docs/credentials.md#endpoint-binding). */
  readonly scope: CredentialScope;
  /** The upgrade's route binds credentials: binary frames are refused (docs/credentials.md#inspectable-routes-only). */
  readonly credentialed: boolean;
  readonly src: { readonly remoteAddress?: string | undefined; readonly remotePort?: number | undefined };
  /** The upgrade's process (docs/identity.md): text frames and reloads are decided with it. */
  readonly identity?: IdentityClaim | undefined;
  /** The network middlewares that read each client text message, in order (chain/websocket-middleware.ts). */
  readonly middlewares?: readonly BoundMiddleware[];
}

interface WsRelay {
  /**
   * Sends `code` both ways at frame boundaries, then ends both sockets (destroyed after the linger). `final`
   * (shutdown): once the client has gone, the upstream is destroyed at once, with no wait for its writes.
   */
  close(code: CloseCode, reason: string, options?: { readonly final?: boolean }): void;
}

const maskKey = (): Buffer => randomBytes(4);

function messageOutcome(ctx: ProxyContext, session: WsSession, method: string): Outcome {
  const o = beginOutcome(session.adapter, 'http', session.src);
  const policy = ctx.store.current();
  o.method = method;
  o.host = session.host;
  o.port = session.port;
  o.path = session.path;
  o.scheme = session.scheme;
  o.generation = policy.generation;
  o.policyHash = policy.hash;
  return o;
}

export function relayWebSocket(
  ctx: ProxyContext,
  input: {
    readonly client: Socket;
    readonly upstream: Socket;
    readonly session: WsSession;
    /** Client bytes that arrived with the upgrade request: frames, parsed like the rest. */
    readonly clientHead: Buffer;
    /** Server bytes that followed the 101 head. */
    readonly upstreamHead: Buffer;
    readonly onClosed: () => void;
    readonly timers?: Timers;
  },
): WsRelay {
  const { client, upstream, session } = input;
  const parser = createClientFrameParser();
  const tracker = createFrameBoundaryTracker();
  let closing: { code: CloseCode; reason: string } | undefined;
  let clientCloseSent = false;
  let closedCount = 0;
  let final = false;
  const timers = input.timers ?? GLOBAL_TIMERS;
  let linger: unknown;
  // While an external middleware service is asked about a text message, what the client sends next waits, in order,
  // with the client paused: nothing overtakes the message.
  const steps = createStepQueue({
    hold: () => client.pause(),
    release: () => {
      // A write made while the client was held may have filled the upstream: then the drain resumes it.
      if (!upstream.writableNeedDrain) client.resume();
      else upstream.once('drain', () => client.resume());
    },
    closed: () => closing !== undefined,
    failed: (err) => fail(CLOSE_CODES.internalError, err instanceof Error ? err.message : String(err), 'middleware-failed'),
  });
  const assembly = createAssemblyTimer({
    onExpire: (which) => fail(CLOSE_CODES.policyViolation, `text message assembly exceeded its ${which} timeout`, 'websocket-timeout'),
    timers,
  });

  const destroyBoth = (): void => {
    assembly.clear();
    client.destroy();
    upstream.destroy();
  };

  /** The relay is ending (our close, or a FIN without a close frame): both sockets are gone by this deadline. */
  function armLinger(): void {
    linger ??= timers.setTimeout(destroyBoth, Math.min(ctx.tunnelIdleTimeoutMs, TUNNEL_LINGER_MS));
  }

  /**
   * The client is gone: nothing the server sends has a reader any more. The upstream gets what is queued for it
   * (its close frame or FIN), then is destroyed instead of waiting, half-closed, for a server that may never FIN.
   */
  function releaseUpstream(): void {
    if (final || upstream.writableFinished) upstream.destroy();
    else {
      upstream.once('finish', () => upstream.destroy());
      upstream.end();
    }
  }

  function toUpstream(bytes: Buffer): void {
    if (!upstream.write(bytes) && !client.isPaused() && !steps.busy) {
      client.pause();
      // A message still with a middleware service keeps the client paused (its queue resumes it).
      upstream.once('drain', () => {
        if (!steps.busy) client.resume();
      });
    }
  }

  function toClient(bytes: Buffer): void {
    if (bytes.length > 0 && client.writable && !client.write(bytes) && !upstream.isPaused()) {
      upstream.pause();
      client.once('drain', () => upstream.resume());
    }
  }

  function sendClientClose(): void {
    if (clientCloseSent || closing === undefined) return;
    clientCloseSent = true;
    if (client.writable) client.end(encodeClose(closing.code, closing.reason));
  }

  function close(code: CloseCode, reason: string, options: { readonly final?: boolean } = {}): void {
    if (options.final === true) final = true;
    if (closing !== undefined) return;
    closing = { code, reason };
    assembly.clear();
    // Client→server bytes are only ever written as whole frames, so upstream is always at a boundary.
    if (upstream.writable) upstream.end(encodeClose(code, '', maskKey()));
    if (tracker.atBoundary()) sendClientClose();
    // Else the server frame under way is finished first (onUpstreamData); the linger bounds the wait.
    upstream.resume();
    armLinger();
  }

  /** A relay-level failure (malformed frames, timeouts): NET:CLOSE beside the close frame. */
  function fail(code: CloseCode, detail: string, reasonCode: OutcomeReason, severity: Severity = 'LOW'): void {
    const policy = ctx.store.current();
    ctx.sink.emit({
      class: 'NET',
      activity: 'CLOSE',
      severity,
      engine: engineOf(reasonCode, undefined),
      dst: { host: session.host, port: session.port },
      message: `websocket closed with ${code}: ${detail}`,
      detail,
      generation: policy.generation,
      policyHash: policy.hash,
      unmapped: { reason_code: reasonCode, close_code: code, adapter: session.adapter },
    });
    close(code, detail);
  }

  /** Emits the message's event and closes with 1008. */
  function refuseMessage(o: Outcome, finding?: string): void {
    o.extra = { ...o.extra, close_code: CLOSE_CODES.policyViolation };
    emitOutcome(ctx.sink, ctx.metrics, o);
    if (finding !== undefined) ctx.sink.emit(findingEvent(o, finding));
    close(CLOSE_CODES.policyViolation, 'policy violation');
  }

  // Fixed for the session (its endpoint is the upgrade's): worked out once, not per message.
  const graphqlMessages = session.endpoint !== undefined && hasGraphqlPolicy(session.endpoint);

  /**
   * docs/destinations.md#websocket-relay: a text message is a WEBSOCKET_TEXT request on the upgrade's path and query.
   * On an endpoint with GraphQL policy it is a GraphQL message (docs/policy.md#graphql-over-websocket): control
   * messages pass, an operation is decided by its type, name and root fields.
   */
  function textAllowed(text: string): boolean {
    if (!session.decideText) return true;
    const { host, port, path, query, adapter } = session;
    const message = graphqlMessages ? classifyGraphqlWsMessage(text) : undefined;
    if (message?.kind === 'control') return true;
    // docs/policy.md#duplicate-json-keys: read two ways, so refused whatever policy says, under audit too.
    if (message?.kind === 'refused') {
      const o = messageOutcome(ctx, session, 'WEBSOCKET_TEXT');
      settle(o, 'deny', message.refusal.reason, inspectionRefusalDetail(message.refusal), undefined);
      refuseMessage(o);
      return false;
    }
    const graphql = message === undefined ? {} : { graphql: message.request };
    const decision = decide(ctx.store.current(), { adapter, host, port, method: 'WEBSOCKET_TEXT', path, query, identity: session.identity, ...graphql });
    if (decision.verdict === 'allow') return true;
    const o = messageOutcome(ctx, session, 'WEBSOCKET_TEXT');
    settle(o, decision.verdict, decision.reason, decision.detail, undefined);
    o.policy = decision.policy;
    o.extra = { rule: decision.rule, endpoint: decision.endpoint?.id, ...identityFields(decision, session.identity) };
    if (decision.verdict === 'deny') {
      refuseMessage(o);
      return false;
    }
    // Audit: forwarded, and logged as ALLOWED with the reason it would have been denied for.
    emitOutcome(ctx.sink, ctx.metrics, o);
    return true;
  }

  // Entries that failed open on this connection: off for the rest of it.
  const middlewaresOff = new Set<string>();

  /** The message as the middlewares left it, or undefined when one denied or failed closed (the socket is closing). */
  function throughMiddlewares(text: string): string | undefined | Promise<string | undefined> {
    if (session.middlewares === undefined || session.middlewares.length === 0) return text;
    const run = runTextMiddlewares(session.middlewares, middlewaresOff, text);
    return run instanceof Promise ? run.then(afterMiddlewares) : afterMiddlewares(run);
  }

  function afterMiddlewares(run: TextMiddlewareResult): string | undefined {
    // The socket closed while a service was asked: the message goes nowhere.
    if (closing !== undefined) return undefined;
    if (!notable(run.invocations)) return run.verdict === 'allow' ? run.text : undefined;
    const o = messageOutcome(ctx, session, 'WEBSOCKET_TEXT');
    o.engine = 'middleware';
    o.extra = { middlewares: run.invocations.map(invocationFields) };
    o.middlewares = run.invocations;
    if (run.verdict === 'allow') {
      settle(o, 'allow', 'endpoint-allowed', 'text message passed network middleware', undefined);
      emitOutcome(ctx.sink, ctx.metrics, o);
      return run.text;
    }
    const denied = run.verdict === 'deny';
    settle(o, 'deny', denied ? 'middleware-denied' : 'middleware-failed', `${denied ? 'denied by' : 'failed in'} network middleware ${run.entry}`, undefined);
    const code = denied ? CLOSE_CODES.policyViolation : CLOSE_CODES.internalError;
    o.extra = { ...o.extra, close_code: code };
    emitOutcome(ctx.sink, ctx.metrics, o);
    close(code, denied ? 'policy violation' : 'middleware failed');
    return undefined;
  }

  function onText(received: string, frames: readonly Buffer[]): void | Promise<void> {
    if (!textAllowed(received)) return;
    const text = throughMiddlewares(received);
    if (text instanceof Promise) return text.then((t) => (t === undefined ? undefined : forwardText(received, t, frames)));
    if (text !== undefined) forwardText(received, text, frames);
  }

  function forwardText(received: string, text: string, frames: readonly Buffer[]): void {
    // docs/credentials.md#substitution-slots: rewritten only with websocket_credential_rewrite; otherwise a marker is refused.
    const rewrite = rewriteWebSocketText({ text, scope: session.scope, rewrite: session.endpoint?.websocketCredentialRewrite === true });
    if (!rewrite.ok) {
      const o = messageOutcome(ctx, session, 'WEBSOCKET_TEXT');
      // The refusal's HTTP status means nothing after a 101: the close code (1008) is what the client sees.
      const { finding } = credentialRefusal(o, rewrite, undefined);
      refuseMessage(o, finding);
      return;
    }
    if (rewrite.text === received) {
      for (const frame of frames) toUpstream(frame);
      return;
    }
    // Changed by a middleware or a credential: one new text frame, its length counted again.
    if (rewrite.text !== text) ctx.metrics.credentialsSubstituted();
    toUpstream(encodeFrame({ opcode: OPCODES.text, payload: Buffer.from(rewrite.text, 'utf8'), maskKey: maskKey() }));
  }

  function onEvent(event: ClientEvent): void | Promise<void> {
    switch (event.kind) {
      case 'control':
        toUpstream(event.frame.raw);
        return;
      case 'binary': {
        if (!session.credentialed) {
          toUpstream(event.frame.raw);
          return;
        }
        const o = messageOutcome(ctx, session, 'WEBSOCKET_BINARY');
        settle(o, 'deny', 'websocket-binary-credentialed', 'binary WebSocket frames are refused on a credentialed upgrade: they cannot be inspected', undefined);
        refuseMessage(o);
        return;
      }
      case 'text-fragment':
        assembly.fragment();
        return;
      case 'text':
        assembly.clear();
        return onText(event.text, event.frames);
    }
  }

  function onClientData(chunk: Buffer): void {
    // After our close, whatever the client still sends (its close answer included) is dropped.
    if (closing !== undefined) return;
    const result = parser.push(chunk);
    for (const event of result.events) {
      steps.run(() => (closing === undefined ? onEvent(event) : undefined));
      if (closing !== undefined) return;
    }
    const error = result.error;
    if (error !== undefined) steps.run(() => fail(error.code, error.message, 'websocket-protocol-error'));
  }

  function onUpstreamData(chunk: Buffer): void {
    if (clientCloseSent) return;
    if (closing === undefined) {
      tracker.feed(chunk);
      toClient(chunk);
      return;
    }
    const end = tracker.untilBoundary(chunk);
    toClient(end < 0 ? chunk : chunk.subarray(0, end));
    if (end >= 0) sendClientClose();
  }

  for (const [self, other] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    self.setTimeout(ctx.tunnelIdleTimeoutMs, destroyBoth);
    self.on('error', destroyBoth);
    self.once('end', () => {
      // A FIN with no close frame: pass it on. During our close, a server FIN mid-frame ends the client too.
      if (other.writable && (closing === undefined || self === upstream)) other.end();
      // A client that sent its FIN is gone (a crashed process closes this way): its socket closes once what is
      // queued for it is out, not at the linger, so it does not hold a connection slot of its source meanwhile.
      if (self === client && client.writable) client.end();
      // A WebSocket does not half-close: the other side gets the linger to finish, not the idle timeout.
      armLinger();
    });
    self.once('close', (hadError: boolean) => {
      if (hadError) destroyBoth();
      else if (!other.destroyed) {
        if (self === client) releaseUpstream();
        else other.end();
        armLinger();
      }
      closedCount++;
      if (closedCount === 2) {
        assembly.clear();
        if (linger !== undefined) timers.clearTimeout(linger);
        input.onClosed();
      }
    });
  }
  client.on('data', onClientData);
  upstream.on('data', onUpstreamData);
  onUpstreamData(input.upstreamHead);
  onClientData(input.clientHead);
  client.resume();
  upstream.resume();
  return { close };
}
