// The response stage of external middleware services (docs/policy.md#responses): an answer to a request whose host an
// entry bound to responses selects is held until every such entry decided, in ascending order: a preflight on the
// status and head, then the whole body when the service asks for it and it can be held. Nothing reaches the workload
// before that, so a block is always a 403 middleware_denied and a fail_closed failure a 502 response_delivery_failed.

import { MAX_MIDDLEWARE_PAYLOAD_BYTES } from '../middleware/registrations.js';
import type { MiddlewareImplementation, ResponseResult } from '../middleware/implementation.js';
import { failedInvocation, type MiddlewareFailure } from '../middleware/outcome.js';
import type { MiddlewareRegistry } from '../middleware/registry.js';
import type { MiddlewareEntry } from '../policy/types.js';
import type { Denial } from './denials.js';
import { middlewareDeniedDenial, responseDeliveryFailedDenial } from './middleware-denials.js';
import { requestFacts, requestView } from './middleware-request.js';
import type { ChainRequest } from './request.js';
import type { ResponseHandler } from './response-chain.js';
import { denied } from './stage.js';
import { header } from './tools-list-filter.js';

/** Statuses whose answers never have a body to show. */
const BODYLESS_STATUSES: ReadonlySet<number> = new Set([204, 205, 304]);

interface ResponseStageEntry {
  readonly entry: MiddlewareEntry;
  readonly impl: MiddlewareImplementation;
}

const NO_ENTRIES: readonly ResponseStageEntry[] = Object.freeze([]);

/** The entries selecting `r`'s host that are bound to responses, in order; empty for most requests (one list kept
 *  for them all: asked on every answer). */
export function responseEntries(r: ChainRequest, registry: MiddlewareRegistry): readonly ResponseStageEntry[] {
  const selecting = r.policy!.middlewaresFor(r.host as string);
  let out: ResponseStageEntry[] | undefined;
  for (let i = 0; i < selecting.length; i++) {
    const entry = selecting[i] as MiddlewareEntry;
    const impl = registry.implementationFor(entry);
    if (impl?.evaluateResponse === undefined || !impl.bindings.has('http-response')) continue;
    out ??= [];
    out.push({ entry, impl });
  }
  return out ?? NO_ENTRIES;
}

/** Whether the body may be offered whole: uncoded, allowed to be transformed, and one the request can have. */
function holdable(r: ChainRequest, status: number, headers: readonly string[]): boolean {
  if (r.method === 'HEAD' || BODYLESS_STATUSES.has(status)) return false;
  const coding = header(headers, 'content-encoding')?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') return false;
  if (/(^|,)\s*no-transform\s*(,|$)/i.test(header(headers, 'cache-control') ?? '')) return false;
  const length = Number(header(headers, 'content-length') ?? '0');
  return !(Number.isFinite(length) && length > MAX_MIDDLEWARE_PAYLOAD_BYTES);
}

function answer(next: ResponseHandler, d: Denial): void {
  const text = Buffer.from(JSON.stringify(d.body));
  next.onHead(d.status, ['content-type', 'application/json', 'content-length', String(text.length)], text, true);
}

/** The handler that holds `r`'s answer for `entries` before it reaches `next`. */
export function middlewareResponseHandler(
  r: ChainRequest,
  entries: readonly ResponseStageEntry[],
  registry: MiddlewareRegistry,
  next: ResponseHandler,
  abort: (err: Error) => void,
): ResponseHandler {
  let head: { status: number; headers: string[] } | undefined;
  const chunks: Buffer[] = [];
  let held = 0;
  let ended = false;
  let overflow = false;
  let trailers: string[] | undefined;
  /** Settled: `pass` relays everything from now on; `replaced` drops the rest of the upstream answer. */
  let state: 'holding' | 'pass' | 'replaced' = 'holding';
  let bodyWaiter: (() => void) | undefined;
  const wake = (): void => {
    const w = bodyWaiter;
    bodyWaiter = undefined;
    w?.();
  };
  const wholeBody = (): Promise<void> => (ended || overflow ? Promise.resolve() : new Promise((resolve) => (bodyWaiter = resolve)));

  function refuse(d: Denial, reason: 'middleware-denied' | 'middleware-failed', detail: string): void {
    state = 'replaced';
    r.settle(denied(d, reason, detail));
    answer(next, d);
    // The rest of the origin's answer is never read: the upstream connection is dropped, not reused.
    if (!ended) abort(new Error('response refused by a network middleware'));
  }

  async function evaluate(entry: MiddlewareEntry, impl: MiddlewareImplementation, status: number, headers: string[]): Promise<ResponseResult> {
    const evaluation = impl.evaluateResponse!(requestView(r, entry));
    try {
      const pre = await evaluation.preflight({ status, headers }, holdable(r, status, headers));
      if (pre.next === 'done') return pre.result;
      const turn = registry.capacity.acquire();
      if (turn === false) return { verdict: 'failed', failure: 'capacity' };
      await turn;
      try {
        await wholeBody();
        if (overflow) return { verdict: 'failed', failure: 'payload-too-large' };
        return await evaluation.body(Buffer.concat(chunks));
      } finally {
        registry.capacity.release();
      }
    } finally {
      evaluation.end();
    }
  }

  function failed(entry: MiddlewareEntry, failure: MiddlewareFailure): boolean {
    r.noteMiddleware(failedInvocation(entry, 'http-response', failure));
    if (entry.onError === 'fail_open') return false;
    refuse(responseDeliveryFailedDenial(requestFacts(r)), 'middleware-failed', `response middleware ${entry.key} failed (${failure}) under fail_closed`);
    return true;
  }

  async function decide(status: number, headers: string[]): Promise<void> {
    for (const { entry, impl } of entries) {
      const result = await evaluate(entry, impl, status, headers).catch((): ResponseResult => ({ verdict: 'failed', failure: 'unavailable' }));
      if (state !== 'holding') return;
      if (overflow) {
        // More arrived than can be held, and part of it is gone: the answer cannot go on whole, whatever on_error says.
        r.noteMiddleware(failedInvocation(entry, 'http-response', 'payload-too-large'));
        refuse(responseDeliveryFailedDenial(requestFacts(r)), 'middleware-failed', `response held for network middleware ${entry.key} is too large`);
        return;
      }
      if (result.verdict === 'failed') {
        if (failed(entry, result.failure)) return;
        continue;
      }
      r.noteMiddleware({
        key: entry.key,
        implementation: entry.middleware,
        binding: 'http-response',
        decision: result.verdict,
        transformed: false,
        findings: result.findings,
        ...(result.verdict === 'deny' && result.reasonCode !== undefined ? { reasonCode: result.reasonCode } : {}),
      });
      if (result.verdict === 'deny') {
        refuse(middlewareDeniedDenial(requestFacts(r), entry.key, result.reasonCode), 'middleware-denied', `response blocked by network middleware ${entry.key}`);
        return;
      }
    }
    release(status, headers);
  }

  /** Every entry let the answer through: what was held goes on, and the rest is relayed as it comes. */
  function release(status: number, headers: string[]): void {
    state = 'pass';
    const body = chunks.length === 0 ? undefined : Buffer.concat(chunks);
    chunks.length = 0;
    next.onHead(status, headers, body, ended && trailers === undefined);
    if (!ended) return;
    if (trailers !== undefined) next.onTrailers?.(trailers);
    next.onEnd();
  }

  const handler: ResponseHandler = {
    onHead(status, headers, body, complete) {
      head = { status, headers };
      if (body !== undefined && body.length > 0) {
        chunks.push(body);
        held += body.length;
      }
      ended = complete;
      void decide(head.status, head.headers);
    },
    onData(chunk) {
      if (state === 'pass') return next.onData(chunk);
      if (state === 'replaced') return;
      held += chunk.length;
      if (held > MAX_MIDDLEWARE_PAYLOAD_BYTES) {
        // Past what boundary holds for a response stage: nothing more is kept, and the answer fails (decide()).
        overflow = true;
        wake();
        return;
      }
      if (!overflow) chunks.push(chunk);
    },
    onEnd() {
      if (state === 'pass') return next.onEnd();
      ended = true;
      wake();
    },
    onError(err) {
      if (state === 'replaced') return;
      // The upstream failed while the answer was held: nothing was sent, so the adapter answers the failure itself.
      state = 'replaced';
      next.onError(err);
    },
  };
  if (next.onTrailers !== undefined) {
    handler.onTrailers = (t) => {
      if (state === 'pass') next.onTrailers?.(t);
      else trailers = t;
    };
  }
  return handler;
}
