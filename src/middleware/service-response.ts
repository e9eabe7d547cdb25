// One answer under a service's HttpResponsePreReturn stream (docs/policy.md#responses): the preflight on the head,
// then, when the service asks for it and the body can be held, the whole body as one message. Every step ends as a
// value within the binding's timeout; the stream is closed when the evaluation ends.

import type * as Grpc from '@grpc/grpc-js';
import type { MiddlewareEntry } from '../policy/types.js';
import type { Timers } from '../shared/timers.js';
import type { ResponseEvaluation, ResponseHead, ResponseResult } from './implementation.js';
import type { BindingProfile } from './manifest.js';
import type { MiddlewareFinding } from './outcome.js';
import { toStruct } from './proto.js';
import { findingsOf, reasonCodeOf, type ResultDiagnostics } from './results.js';
import { serviceHeaders } from './service-headers.js';

const HEADERS_ONLY = 'HTTP_RESPONSE_BODY_MODE_HEADERS_ONLY';
const WHOLE_BODY = 'HTTP_RESPONSE_BODY_MODE_WHOLE_BODY_BYTES';

type Failure = 'unavailable' | 'timeout' | 'invalid';
const FAILED: Readonly<Record<Failure, ResponseResult>> = {
  unavailable: { verdict: 'failed', failure: 'unavailable' },
  timeout: { verdict: 'failed', failure: 'timeout' },
  invalid: { verdict: 'failed', failure: 'invalid-result' },
};

type Message = Record<string, unknown> & ResultDiagnostics;

export function openResponseEvaluation(input: {
  readonly client: Grpc.Client;
  readonly limits: BindingProfile | undefined;
  readonly timers: Timers;
  readonly preflight: { readonly entry: MiddlewareEntry; readonly target: Record<string, unknown>; readonly context: Record<string, unknown> };
}): ResponseEvaluation {
  const { limits, timers } = input;
  let stream: Grpc.ClientDuplexStream<unknown, Message> | undefined;
  const queued: Message[] = [];
  let waiter: ((message: Message | undefined) => void) | undefined;
  let closed = false;

  function deliver(message: Message | undefined): void {
    if (message === undefined) closed = true;
    const w = waiter;
    waiter = undefined;
    if (w !== undefined) w(message);
    else if (message !== undefined) queued.push(message);
  }

  /** The next result of kind `field`, or the failure that stands for it. */
  function next(field: string): Promise<Message | Failure> {
    const pick = (message: Message): Message | Failure => (message.result === field ? ((message[field] as Message | null) ?? 'invalid') : 'invalid');
    const ready = queued.shift();
    if (ready !== undefined) return Promise.resolve(pick(ready));
    if (closed) return Promise.resolve('unavailable');
    return new Promise((resolve) => {
      const timer = timers.setTimeout(() => {
        waiter = undefined;
        stream?.cancel();
        resolve('timeout');
      }, limits?.timeoutMs ?? 0);
      waiter = (message) => {
        timers.clearTimeout(timer);
        resolve(message === undefined ? 'unavailable' : pick(message));
      };
    });
  }

  function diagnostics(message: Message): { reasonCode: string | undefined; findings: readonly MiddlewareFinding[] } | undefined {
    const reasonCode = reasonCodeOf(message.reason_code);
    const findings = findingsOf(message);
    if (reasonCode === 'invalid' || findings === 'invalid') return undefined;
    return { reasonCode, findings };
  }

  function end(): void {
    if (stream === undefined || closed) return;
    closed = true;
    stream.cancel();
  }

  return {
    async preflight(head: ResponseHead, bodyHoldable: boolean) {
      if (limits === undefined) return { next: 'done', result: FAILED.unavailable };
      const { entry, target, context } = input.preflight;
      const s = (input.client as unknown as { Evaluate(): Grpc.ClientDuplexStream<unknown, Message> }).Evaluate();
      s.on('data', (message: Message) => deliver(message));
      s.on('error', () => deliver(undefined));
      s.on('end', () => deliver(undefined));
      stream = s;
      s.write({
        preflight: {
          context,
          target,
          status_code: head.status,
          headers: serviceHeaders(head.headers).map(([name, value]) => ({ name, value })),
          middleware_name: entry.middleware,
          config: toStruct(entry.config),
          max_payload_bytes: limits.maxPayloadBytes,
          permitted_body_modes: bodyHoldable ? [HEADERS_ONLY, WHOLE_BODY] : [HEADERS_ONLY],
        },
      });
      const result = await next('preflight_result');
      if (typeof result === 'string') return { next: 'done', result: FAILED[result] };
      const d = diagnostics(result);
      if (d === undefined) return { next: 'done', result: FAILED.invalid };
      if (result.action === 'skip') return { next: 'done', result: { verdict: 'allow', findings: d.findings } };
      if (result.action === 'block_delivery') return { next: 'done', result: { verdict: 'deny', reasonCode: d.reasonCode, findings: d.findings } };
      const mode = result.action === 'inspect' ? (result.inspect as { body_mode?: string } | null)?.body_mode : undefined;
      if (mode === HEADERS_ONLY) return { next: 'done', result: { verdict: 'allow', findings: d.findings } };
      // A mode it was not offered (the whole body of one that cannot be held) is outside the protocol.
      if (mode !== WHOLE_BODY || !bodyHoldable) return { next: 'done', result: FAILED.invalid };
      return { next: 'body' };
    },
    async body(body: Buffer) {
      if (limits === undefined || stream === undefined) return FAILED.unavailable;
      if (body.length > limits.maxPayloadBytes) return { verdict: 'failed', failure: 'payload-too-large' };
      stream.write({ body: { data: body } });
      const result = await next('body_result');
      if (typeof result === 'string') return FAILED[result];
      const d = diagnostics(result);
      if (d === undefined) return FAILED.invalid;
      if (result.action === 'block_delivery') return { verdict: 'deny', reasonCode: d.reasonCode, findings: d.findings };
      if (result.action === 'pass_through') return { verdict: 'allow', findings: d.findings };
      return FAILED.invalid;
    },
    end,
  };
}
