// What a parser refused before any request existed (docs/events.md#parser-refusals): an HTTP/1.1 head llhttp
// rejected (http1/h1-server.ts), a malformed HTTP/2 stream, a connection error an HTTP/2 client made. Each is
// recorded on a request like any other, so its one event is built by event.ts; the events aggregate per source,
// refusal and destination, so a flood of malformed requests costs a line per kind and interval, never one per attempt.

import type { TunnelTarget } from '../proxy/context.js';
import type { AuditEvent } from '../telemetry/event.js';
import { ChainRequest } from './request.js';

/** How long repeats of one refusal (same source address, destination, kind and parser error) are counted before their event goes out. */
export const PARSER_EVENT_INTERVAL_MS = 10_000;
/** Distinct refusals counted at once; reaching it writes every count early (telemetry/event-aggregate.ts). */
export const MAX_PARSER_EVENT_KEYS = 1_024;

const NO_BODY: AsyncIterable<Buffer> = { [Symbol.asyncIterator]: () => ({ next: () => Promise.resolve({ done: true, value: undefined }) }) };
const NO_HOOKS = { continueBody: () => undefined, goingUpstream: () => false };

export interface ParserRefusalInput {
  /** `forward` on the proxy listener itself, `l7` inside an inspected tunnel. */
  readonly adapter: 'forward' | 'l7';
  readonly src: { readonly remoteAddress?: string | undefined; readonly remotePort?: number | undefined };
  /** The tunnel the bytes came through: its host and port are the destination the event names. */
  readonly tunnel: TunnelTarget | undefined;
  readonly h2: boolean;
  readonly method: string;
  readonly reason: 'bad-request' | 'head-too-large';
  /** The status sent, or undefined when nothing could be (an HTTP/2 stream reset, a GOAWAY). */
  readonly status: number | undefined;
  /** A stable name for what the parser refused: llhttp's code (`HPE_INVALID_METHOD`), an HTTP/2 head problem or error code. */
  readonly parserError: string;
  /** One sentence: the parser's own fixed words, never the bytes it refused. */
  readonly detail: string;
}

/** The request a parser refused, settled: hand it to event.ts requestOutcome for its event. */
export function parserRefusal(input: ParserRefusalInput): ChainRequest {
  const wire = { httpVersion: input.h2 ? '2.0' : '1.1', url: '', rawHeaders: [], headers: {} };
  const r = new ChainRequest({ adapter: input.adapter, wire, hooks: NO_HOOKS, tunnel: input.tunnel, src: input.src, method: input.method, h2: input.h2, upgradable: false, body: NO_BODY });
  if (input.tunnel !== undefined) {
    r.host = input.tunnel.host;
    r.port = input.tunnel.port;
    if (input.tunnel.tls) r.scheme = 'https';
  }
  r.parserError = input.parserError;
  r.settle({ verdict: 'deny', reason: input.reason, detail: input.detail, status: input.status });
  return r;
}

/** The events that aggregate: those a parser refusal wrote (telemetry/event-aggregate.ts `aggregated`). */
export function isParserRefusal(event: AuditEvent): boolean {
  return typeof event.unmapped?.parser_error === 'string';
}

/** What makes two parser refusals the same: who sent them, where they went, what was refused and how it was answered. */
export function parserRefusalKey(event: AuditEvent): string {
  const u = event.unmapped;
  return `${event.src?.ip ?? ''}|${event.class}|${event.activity}|${String(u?.adapter)}|${event.dst?.host ?? ''}|${event.dst?.port ?? ''}|${String(u?.reason_code)}|${String(u?.parser_error)}|${String(u?.status_code ?? '')}`;
}
