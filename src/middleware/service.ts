// One registered middleware service over gRPC (docs/policy.md#external-middleware-services): its channel, the
// Describe handshake, config validation, and each request's call under its timeout. Every call ends as a value (a
// result or a failure kind); the service's free text is never read into a log or an answer. Responses: service-response.ts.

import type * as Grpc from '@grpc/grpc-js';
import type { MiddlewareEntry } from '../policy/types.js';
import { BoundaryError } from '../shared/errors.js';
import type { Timers } from '../shared/timers.js';
import type { EntryResult, MiddlewareImplementation, MiddlewareTarget, RequestView, TextResult } from './implementation.js';
import { profileOf, type ServiceProfile } from './manifest.js';
import type { MiddlewareCallLabel } from './metric-specs.js';
import type { MiddlewareBinding } from './outcome.js';
import { CONTRACT_CAPABILITY, type MiddlewareProtocol, PROTOCOL_MAJOR, toStruct } from './proto.js';
import type { MiddlewareRegistration } from './registrations.js';
import { httpRequestResult, webSocketMessageResult } from './results.js';
import { openResponseEvaluation } from './service-response.js';

/** Largest message either side sends: a body at the payload limit plus its envelope. */
const MAX_GRPC_MESSAGE_BYTES = 5 * 1024 * 1024;
/**
 * Describe and ValidateConfig run at load, off the request path, and the first one also opens the channel (TLS
 * included): they get this long, never less than the registration's timeout.
 */
export const MIDDLEWARE_LOAD_TIMEOUT_MS = 5_000;

const CALL_LABELS: Readonly<Record<string, MiddlewareCallLabel>> = {
  Describe: 'describe',
  ValidateConfig: 'validate_config',
  EvaluateHttpRequest: 'http_request',
  EvaluateWebSocketMessage: 'websocket_message',
};

export type Reply = { readonly ok: true; readonly value: Record<string, unknown> } | { readonly ok: false; readonly failure: 'timeout' | 'unavailable' };

type UnaryMethod = (request: unknown, options: Grpc.CallOptions, callback: (err: Grpc.ServiceError | null, value?: unknown) => void) => Grpc.ClientUnaryCall;

/** What each unary call records (middleware/metric-specs.ts); no-ops without a metrics registry. */
export interface CallMetrics {
  record(call: MiddlewareCallLabel, result: 'ok' | 'timeout' | 'unavailable', seconds: number): void;
}

export interface ServiceDeps {
  readonly protocol: MiddlewareProtocol;
  readonly timers: Timers;
  readonly metrics: CallMetrics;
  /** Milliseconds, for the call durations. */
  readonly now: () => number;
  /** boundary's version, in the Describe request. */
  readonly version: string;
}

export interface MiddlewareService {
  readonly registration: MiddlewareRegistration;
  /** The handshake; kept once answered, asked again after a failure. Rejects MIDDLEWARE_HANDSHAKE_FAILED. */
  describe(): Promise<ServiceProfile>;
  /** Whether the service accepts `entry`'s config; rejects MIDDLEWARE_HANDSHAKE_FAILED or MIDDLEWARE_UNAVAILABLE when it cannot say. */
  validateConfig(entry: MiddlewareEntry): Promise<boolean>;
  /** The service as the chain calls it; every call fails `unavailable` until a handshake has succeeded. */
  readonly implementation: MiddlewareImplementation;
  close(): void;
}

export function createMiddlewareService(registration: MiddlewareRegistration, deps: ServiceDeps): MiddlewareService {
  const { grpc } = deps.protocol;
  const credentials = registration.tls
    ? grpc.credentials.createSsl(registration.caPem === undefined ? null : Buffer.from(registration.caPem))
    : grpc.credentials.createInsecure();
  const options = { 'grpc.max_receive_message_length': MAX_GRPC_MESSAGE_BYTES, 'grpc.max_send_message_length': MAX_GRPC_MESSAGE_BYTES };
  const client = new deps.protocol.SupervisorMiddleware(registration.target, credentials, options);
  let responses: Grpc.Client | undefined;
  let profile: ServiceProfile | undefined;
  let describing: Promise<ServiceProfile> | undefined;

  /** One unary call, ended by boundary's own timer: a timeout cancels it. */
  function call(method: string, request: unknown, timeoutMs: number): Promise<Reply> {
    const startedAt = deps.now();
    return new Promise((resolve) => {
      let timedOut = false;
      const invoke = (client as unknown as Record<string, UnaryMethod>)[method] as UnaryMethod;
      const pending = invoke.call(client, request, {}, (err, value) => {
        deps.timers.clearTimeout(timer);
        const reply: Reply =
          err === null && value !== null && typeof value === 'object'
            ? { ok: true, value: value as Record<string, unknown> }
            : { ok: false, failure: timedOut ? 'timeout' : 'unavailable' };
        deps.metrics.record(CALL_LABELS[method] ?? 'http_request', reply.ok ? 'ok' : reply.failure, Math.max(0, deps.now() - startedAt) / 1000);
        resolve(reply);
      });
      const timer = deps.timers.setTimeout(() => {
        timedOut = true;
        pending.cancel();
      }, timeoutMs);
    });
  }

  function describe(): Promise<ServiceProfile> {
    if (profile !== undefined) return Promise.resolve(profile);
    describing ??= (async () => {
      const gateway = {
        protocol_version: { major: PROTOCOL_MAJOR, minor: 0 },
        implementation_name: 'boundary',
        implementation_version: deps.version,
        supported_capabilities: [CONTRACT_CAPABILITY],
        required_capabilities: [CONTRACT_CAPABILITY],
      };
      const reply = await call('Describe', { gateway }, Math.max(registration.timeoutMs, MIDDLEWARE_LOAD_TIMEOUT_MS));
      if (!reply.ok) throw new BoundaryError('MIDDLEWARE_HANDSHAKE_FAILED', `middleware service ${registration.name} (${registration.endpoint}) did not answer Describe: ${reply.failure}`);
      const described = profileOf(reply.value, registration);
      if (typeof described === 'string') throw new BoundaryError('MIDDLEWARE_HANDSHAKE_FAILED', `middleware service ${registration.name}: ${described}`);
      profile = described;
      return described;
    })().finally(() => {
      describing = undefined;
    });
    return describing;
  }

  const limitsFor = (binding: MiddlewareBinding) => profile?.get(binding);

  async function evaluateBody(body: Buffer, view: RequestView): Promise<EntryResult> {
    const limits = limitsFor('http-request');
    if (limits === undefined) return { verdict: 'failed', failure: 'unavailable' };
    if (body.length > limits.maxPayloadBytes) return { verdict: 'failed', failure: 'payload-too-large' };
    const reply = await call(
      'EvaluateHttpRequest',
      {
        phase: 'SUPERVISOR_MIDDLEWARE_PHASE_PRE_CREDENTIALS',
        context: contextMessage(view),
        config: toStruct(view.entry.config),
        target: targetMessage(view.target),
        headers: view.headers.map(([name, value]) => ({ name, value })),
        body,
        middleware_name: view.entry.middleware,
      },
      limits.timeoutMs,
    );
    if (!reply.ok) return { verdict: 'failed', failure: reply.failure };
    return httpRequestResult(reply.value, limits.maxPayloadBytes);
  }

  /** Messages asked so far, per upgrade (its view): the next message's sequence number. */
  const sequences = new WeakMap<RequestView, number>();

  async function evaluateText(text: string, view?: RequestView): Promise<TextResult> {
    const limits = limitsFor('websocket-message');
    if (limits === undefined || view === undefined) return { verdict: 'failed', failure: 'unavailable' };
    if (Buffer.byteLength(text, 'utf8') > limits.maxPayloadBytes) return { verdict: 'failed', failure: 'payload-too-large' };
    const sequence = (sequences.get(view) ?? 0) + 1;
    sequences.set(view, sequence);
    const reply = await call(
      'EvaluateWebSocketMessage',
      {
        context: contextMessage(view),
        config: toStruct(view.entry.config),
        target: targetMessage({ ...view.target, query: '' }),
        sequence,
        text,
        middleware_name: view.entry.middleware,
      },
      limits.timeoutMs,
    );
    if (!reply.ok) return { verdict: 'failed', failure: reply.failure };
    return webSocketMessageResult(reply.value, limits.maxPayloadBytes);
  }

  const implementation: MiddlewareImplementation = {
    get bindings() {
      return new Set(profile?.keys() ?? []);
    },
    get maxPayloadBytes() {
      return limitsFor('http-request')?.maxPayloadBytes ?? 0;
    },
    evaluateBody,
    evaluateText,
    evaluateResponse(view) {
      responses ??= new deps.protocol.HttpResponsePreReturn(registration.target, credentials, options);
      return openResponseEvaluation({
        client: responses,
        limits: limitsFor('http-response'),
        timers: deps.timers,
        preflight: { entry: view.entry, target: targetMessage({ ...view.target, query: '' }), context: contextMessage(view) },
      });
    },
  };

  return {
    registration,
    describe,
    async validateConfig(entry) {
      await describe();
      const reply = await call('ValidateConfig', { config: toStruct(entry.config), middleware_name: entry.middleware }, Math.max(registration.timeoutMs, MIDDLEWARE_LOAD_TIMEOUT_MS));
      if (!reply.ok) throw new BoundaryError('MIDDLEWARE_UNAVAILABLE', `middleware service ${registration.name} did not answer ValidateConfig: ${reply.failure}`);
      // The reason is the service's own text: the operator finds it in the service's log, not in boundary's.
      return reply.value.valid === true;
    },
    implementation,
    close() {
      client.close();
      responses?.close();
    },
  };
}

function contextMessage(view: RequestView): Record<string, unknown> {
  const process = view.binary === undefined ? null : { binary: view.binary, pid: 0 };
  return { request_id: view.requestId, sandbox_id: '', originating_process: process, sandbox: '', workspace: '' };
}

function targetMessage(target: MiddlewareTarget): Record<string, unknown> {
  return { scheme: target.scheme, host: target.host, port: target.port, method: target.method, path: target.path, query: target.query };
}
