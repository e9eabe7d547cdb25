// The request's network middlewares (docs/policy.md#network-middlewares), run once policy allowed it and before any
// credential is written into it: the body held (within the shared capacity), every selected entry in ascending order,
// each seeing the changes of those before it (an external service's header changes too). A replaced body is read and
// decided again by policy before the next entry (GraphQL, JSON-RPC, MCP). A deny, or a failure under fail_closed,
// ends the request; fail_open goes on.

import { randomUUID } from 'node:crypto';
import { containsMarker, redactPlaceholders } from '../credentials/placeholder.js';
import { withContentLength } from '../middleware/headers.js';
import type { BodyStream, EntryResult, MiddlewareImplementation, MiddlewareRequest, RequestView } from '../middleware/implementation.js';
import { failedInvocation, isReasonCode, type MiddlewareFailure } from '../middleware/outcome.js';
import type { MiddlewareRegistry } from '../middleware/registry.js';
import { applyMutations, serviceHeaders } from '../middleware/service-headers.js';
import type { MiddlewareEntry } from '../policy/types.js';
import { readPrefix } from './credential-injection.js';
import { middlewareCapacityDenial, middlewareDeniedDenial, middlewareFailedDenial, type MiddlewareRequestFacts } from './middleware-denials.js';
import type { ChainRequest } from './request.js';
import { denied, type Refusal, runStages, type Stage } from './stage.js';

export interface MiddlewareRunDeps {
  readonly registry: MiddlewareRegistry;
  /** The stages that read a replaced body and decide it again (body-hold, mcp-request, l7, verdict). */
  readonly reevaluate: readonly Stage<ChainRequest>[];
}

export function requestFacts(r: ChainRequest): MiddlewareRequestFacts {
  return {
    policy: r.decision?.policy,
    method: r.decidedMethod,
    path: r.path ?? '/',
    host: r.host as string,
    port: r.port as number,
    binary: r.decision?.binary,
  };
}

/** The request as the client sent it, for an implementation that reads more than the body. */
export function middlewareRequestOf(r: ChainRequest): MiddlewareRequest {
  return { host: r.host as string, port: r.port as number, path: r.path ?? '/', target: r.wire.url, headers: r.wire.rawHeaders, endpoint: r.decision?.endpoint };
}

async function* once(body: Buffer): AsyncGenerator<Buffer> {
  yield body;
}

async function* resumed(prefix: Buffer, rest: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  yield prefix;
  for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
}

function failure(r: ChainRequest, entry: MiddlewareEntry, kind: MiddlewareFailure): Refusal | undefined {
  r.noteMiddleware(failedInvocation(entry, 'http-request', kind));
  if (entry.onError === 'fail_open') return undefined;
  return denied(middlewareFailedDenial(requestFacts(r)), 'middleware-failed', `network middleware ${entry.key} failed (${kind}) under fail_closed`);
}

/**
 * A body the entries cannot see at all (a streamed gRPC or Connect body: holding it would stall the call): refused when
 * any entry's on_uninspectable is deny, else each entry is recorded as failed open.
 */
export function uninspectableBody(r: ChainRequest, entries: readonly MiddlewareEntry[]): Refusal | undefined {
  for (const entry of entries) r.noteMiddleware({ ...failedInvocation(entry, 'http-request', 'uninspectable'), failedOpen: entry.onUninspectable === 'allow' });
  const blocking = entries.find((e) => e.onUninspectable === 'deny');
  if (blocking === undefined) return undefined;
  return denied(middlewareFailedDenial(requestFacts(r)), 'middleware-uninspectable', `network middleware ${blocking.key} cannot inspect a streamed body`);
}

/** Runs `entries` on `r` within a capacity turn; the refusal that ends the request, or undefined. */
export function runRequestMiddlewares(r: ChainRequest, entries: readonly MiddlewareEntry[], deps: MiddlewareRunDeps): Refusal | undefined | Promise<Refusal | undefined> {
  const turn = deps.registry.capacity.acquire();
  if (turn === false) {
    for (const entry of entries) r.noteMiddleware(failedInvocation(entry, 'http-request', 'capacity'));
    return denied(middlewareCapacityDenial(requestFacts(r)), 'middleware-capacity', 'network middleware capacity is full');
  }
  const run = async (): Promise<Refusal | undefined> => {
    try {
      return await runEntries(r, entries, deps);
    } finally {
      deps.registry.capacity.release();
    }
  };
  return turn === true ? run() : turn.then(run);
}

/** The query as the origin gets it, placeholders shown as `[CREDENTIAL]`; one that still names a key is not shown. */
function queryOf(r: ChainRequest): string {
  const at = r.target.indexOf('?');
  const query = r.canon !== undefined ? r.query : at < 0 ? '' : redactPlaceholders(r.target.slice(at + 1));
  return containsMarker(query) ? '' : query;
}

/** What an implementation is told about `r` besides its body (a service: no credential, no placeholder, no framing). */
export function requestView(r: ChainRequest, entry: MiddlewareEntry, request: MiddlewareRequest = middlewareRequestOf(r)): RequestView {
  r.middlewareRequestId ??= randomUUID();
  return {
    entry,
    request,
    target: {
      scheme: r.scheme,
      host: r.host as string,
      port: r.port as number,
      method: r.decidedMethod,
      path: r.path ?? '/',
      query: queryOf(r),
    },
    headers: serviceHeaders(r.requestHeaders ?? r.wire.rawHeaders),
    requestId: r.middlewareRequestId,
    binary: r.decision?.binary,
  };
}

/** The implementations of `entries` that take requests; an unregistered or not yet described service fails. */
function requestStages(entries: readonly MiddlewareEntry[], registry: MiddlewareRegistry): { entry: MiddlewareEntry; impl: MiddlewareImplementation | undefined }[] {
  const out: { entry: MiddlewareEntry; impl: MiddlewareImplementation | undefined }[] = [];
  for (const entry of entries) {
    const impl = registry.implementationFor(entry);
    // A service that described itself without a request binding is not a request stage (it may be a response one).
    if (impl !== undefined && impl.bindings.size > 0 && !impl.bindings.has('http-request')) continue;
    out.push({ entry, impl });
  }
  return out;
}

const UNAVAILABLE: EntryResult = { verdict: 'failed', failure: 'unavailable' };

/** Thrown inside a streamed body when an entry reading it as it streams denies: the exchange fails with the refusal. */
export class MiddlewareStreamDeniedError extends Error {
  override readonly name = 'MiddlewareStreamDeniedError';
  readonly refusal: Refusal;
  constructor(refusal: Refusal) {
    super('denied by a network middleware while the body streamed');
    this.refusal = refusal;
  }
}

/** `body` through `stream`: bytes go on only once released, and a deny stops it before them (recorded on `r`). */
async function* streamChecked(r: ChainRequest, entry: MiddlewareEntry, stream: BodyStream, body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  for await (const chunk of body) {
    const findings = stream.feed(chunk);
    if (findings.length > 0) throw new MiddlewareStreamDeniedError(record(r, entry, { verdict: 'deny', reasonCode: stream.reasonCode, findings }) as Refusal);
    const out = stream.release();
    if (out.length > 0) yield out;
  }
  record(r, entry, { verdict: 'allow', body: undefined, findings: [] });
  const rest = stream.flush();
  if (rest.length > 0) yield rest;
}

function fits(impl: MiddlewareImplementation, body: Buffer, complete: boolean): boolean {
  return complete && body.length <= impl.maxPayloadBytes;
}

function evaluate(impl: MiddlewareImplementation, body: Buffer, complete: boolean, view: RequestView): EntryResult | Promise<EntryResult> {
  if (fits(impl, body, complete)) return impl.evaluateBody(body, view);
  // The head can still be read by an entry that reads it (the reverse canary): its denial stands.
  const head = impl.evaluateHead?.(view);
  return head?.verdict === 'deny' ? head : { verdict: 'failed', failure: 'payload-too-large' };
}

/** Records an entry's allow or deny; the refusal a deny makes. */
function record(r: ChainRequest, entry: MiddlewareEntry, result: Exclude<EntryResult, { verdict: 'failed' }>): Refusal | undefined {
  const reasonCode = result.verdict === 'deny' && result.reasonCode !== undefined && isReasonCode(result.reasonCode) ? result.reasonCode : undefined;
  const changed = result.verdict === 'allow' && (result.body !== undefined || (result.mutations ?? []).length > 0);
  r.noteMiddleware({
    key: entry.key,
    implementation: entry.middleware,
    binding: 'http-request',
    decision: result.verdict,
    transformed: changed,
    findings: result.findings,
    ...(reasonCode === undefined ? {} : { reasonCode }),
  });
  if (result.verdict !== 'deny') return undefined;
  return denied(middlewareDeniedDenial(requestFacts(r), entry.key, reasonCode), 'middleware-denied', `denied by network middleware ${entry.key}`);
}

/**
 * A request whose body no entry will see (a WebSocket upgrade, a streamed body): the entries that read the head alone
 * (the reverse canary) decide it now. A failure is left to what follows (on_uninspectable, the messages).
 */
export function runHeadChecks(r: ChainRequest, entries: readonly MiddlewareEntry[], registry: MiddlewareRegistry): Refusal | undefined {
  const request = middlewareRequestOf(r);
  for (const entry of entries) {
    const impl = registry.implementationFor(entry);
    if (impl?.evaluateHead === undefined) continue;
    const result = impl.evaluateHead(requestView(r, entry, request));
    if (result.verdict === 'failed') continue;
    const refused = record(r, entry, result);
    if (refused !== undefined) return refused;
  }
  return undefined;
}

async function runEntries(r: ChainRequest, entries: readonly MiddlewareEntry[], deps: MiddlewareRunDeps): Promise<Refusal | undefined> {
  const hasBody = r.framing?.hasBody === true || r.bodyFollows;
  const stages = requestStages(entries, deps.registry);
  // Held up to the largest limit; a body past it is too large for every entry (readPrefix: incomplete).
  const limit = Math.max(0, ...stages.map((s) => s.impl?.maxPayloadBytes ?? 0));
  let body: Buffer = Buffer.alloc(0);
  let complete = true;
  let rest: AsyncIterator<Buffer> | undefined;
  if (hasBody && stages.length > 0) {
    r.hooks.continueBody();
    ({ prefix: body, complete, rest } = await readPrefix(r.body, limit));
  }
  let replaced = false;
  const request = middlewareRequestOf(r);
  const streams: { entry: MiddlewareEntry; stream: BodyStream }[] = [];
  for (const { entry, impl } of stages) {
    if (impl !== undefined && !fits(impl, body, complete) && impl.streamBody !== undefined) {
      // Too large to hold, but read as it streams: the head now, the body on its way upstream.
      const view = requestView(r, entry, request);
      const head = impl.evaluateHead?.(view);
      if (head?.verdict === 'deny') return record(r, entry, head);
      streams.push({ entry, stream: impl.streamBody(view) });
      continue;
    }
    const result: EntryResult = impl === undefined ? UNAVAILABLE : await evaluate(impl, body, complete, requestView(r, entry, request));
    if (result.verdict === 'failed') {
      const refused = failure(r, entry, result.failure);
      if (refused !== undefined) return refused;
      continue;
    }
    const refused = record(r, entry, result);
    if (refused !== undefined || result.verdict === 'deny') return refused;
    // Checked all together when the result was read (middleware/results.ts): every change applies, or none did.
    const mutations = result.mutations ?? [];
    if (mutations.length > 0) r.requestHeaders = applyMutations(r.requestHeaders ?? r.wire.rawHeaders, mutations);
    if (result.body === undefined) continue;
    body = result.body;
    replaced = true;
    // The origin acts on the replacement: policy reads and decides it as it did the body the client sent.
    if (r.hold !== undefined) {
      r.body = once(body);
      const again = await runStages(deps.reevaluate, r);
      if (again !== undefined) return again;
    }
  }
  if (replaced) {
    r.requestHeaders = withContentLength(r.requestHeaders ?? r.wire.rawHeaders, body.length);
    r.body = once(body);
  } else if (hasBody && stages.length > 0) {
    r.body = complete ? once(body) : resumed(body, rest as AsyncIterator<Buffer>);
  }
  for (const { entry, stream } of streams) r.body = streamChecked(r, entry, stream, r.body);
  return undefined;
}
