// A real external middleware service for tests: @grpc/grpc-js serving proto/ryno/middleware/v1/middleware.proto on
// 127.0.0.1:0 (plaintext, or TLS with a given certificate), whose answers each test sets through `behaviour`. It records what it was sent, and can be
// killed (listener and connections) to stand for a crashed service.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as loader from '@grpc/proto-loader';

const PROTO_DIR = fileURLToPath(new URL('../../proto', import.meta.url));

export type Message = Record<string, unknown>;

export interface Behaviour {
  manifest(): Message;
  validate(config: Message): boolean;
  /** The result of one EvaluateHttpRequest, after `delayMs`. */
  evaluate(request: Message): Message;
  delayMs: number;
  /** The result of one EvaluateWebSocketMessage, after `textDelayMs`. */
  text(request: Message): Message;
  textDelayMs: number;
  /** The preflight result of one response (undefined: never answered), and (when it asked for the body) the body's. */
  preflight(event: Message): Message | undefined;
  body(data: Buffer): Message;
}

export const CONTRACT = 'ryno.supervisor-middleware.contract';
export const WEBSOCKET_UNARY = 'boundary.middleware.websocket-message-unary';

type Operation = 'HTTP_REQUEST' | 'HTTP_RESPONSE' | 'WEBSOCKET_MESSAGE';

export function manifest(bindings: { operation: Operation; maxPayloadBytes?: number }[], capabilities: string[] = [CONTRACT, WEBSOCKET_UNARY]): Message {
  return {
    name: 'test-service',
    bindings: bindings.map((b) => ({
      operation: `SUPERVISOR_MIDDLEWARE_OPERATION_${b.operation}`,
      phase: b.operation === 'HTTP_RESPONSE' ? 'SUPERVISOR_MIDDLEWARE_PHASE_PRE_RETURN' : 'SUPERVISOR_MIDDLEWARE_PHASE_PRE_CREDENTIALS',
      max_payload_bytes: b.maxPayloadBytes ?? 1024 * 1024,
    })),
    extension: { protocol_version: { major: 1, minor: 0 }, implementation_name: 'test', supported_capabilities: capabilities },
  };
}

export function defaultBehaviour(): Behaviour {
  return {
    manifest: () => manifest([{ operation: 'HTTP_REQUEST' }, { operation: 'HTTP_RESPONSE' }, { operation: 'WEBSOCKET_MESSAGE' }]),
    validate: () => true,
    evaluate: () => ({ decision: 'DECISION_ALLOW' }),
    delayMs: 0,
    text: () => ({ decision: 'DECISION_ALLOW' }),
    textDelayMs: 0,
    preflight: () => ({ skip: {} }),
    body: () => ({ pass_through: {} }),
  };
}

export interface MiddlewareService {
  readonly port: number;
  readonly behaviour: Behaviour;
  /** Every EvaluateHttpRequest received, as decoded. */
  readonly requests: Message[];
  /** Every EvaluateWebSocketMessage received. */
  readonly texts: Message[];
  readonly validated: Message[];
  /** Stops the listener and drops every connection at once, as a crash would. */
  kill(): void;
  close(): Promise<void>;
}

export async function startMiddlewareService(options: { readonly tls?: { readonly certPem: string; readonly keyPem: string } } = {}): Promise<MiddlewareService> {
  const definition = await loader.load('ryno/middleware/v1/middleware.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
  const v1 = (grpc.loadPackageDefinition(definition) as unknown as { ryno: { middleware: { v1: Record<string, { service: grpc.ServiceDefinition }> } } }).ryno.middleware.v1;
  const behaviour = defaultBehaviour();
  const requests: Message[] = [];
  const validated: Message[] = [];
  const texts: Message[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, answer: () => void): void => {
    if (ms === 0) {
      answer();
      return;
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      answer();
    }, ms);
    timers.add(timer);
  };
  const server = new grpc.Server();
  server.addService(v1.SupervisorMiddleware!.service, {
    Describe: (_call: grpc.ServerUnaryCall<Message, Message>, done: grpc.sendUnaryData<Message>) => done(null, behaviour.manifest()),
    ValidateConfig: (call: grpc.ServerUnaryCall<Message, Message>, done: grpc.sendUnaryData<Message>) => {
      validated.push(call.request);
      done(null, { valid: behaviour.validate(call.request.config as Message), reason: 'the test service said no' });
    },
    EvaluateHttpRequest: (call: grpc.ServerUnaryCall<Message, Message>, done: grpc.sendUnaryData<Message>) => {
      requests.push(call.request);
      later(behaviour.delayMs, () => done(null, behaviour.evaluate(call.request)));
    },
    EvaluateWebSocketMessage: (call: grpc.ServerUnaryCall<Message, Message>, done: grpc.sendUnaryData<Message>) => {
      texts.push(call.request);
      later(behaviour.textDelayMs, () => done(null, behaviour.text(call.request)));
    },
  });
  server.addService(v1.HttpResponsePreReturn!.service, {
    Evaluate: (call: grpc.ServerDuplexStream<Message, Message>) => {
      call.on('data', (event: Message) => {
        if (event.event === 'preflight') {
          const result = behaviour.preflight(event.preflight as Message);
          if (result !== undefined) call.write({ preflight_result: result });
        }
        else if (event.event === 'body') call.write({ body_result: behaviour.body((event.body as { data: Buffer }).data) });
      });
      call.on('end', () => call.end());
      call.on('error', () => undefined);
    },
  });
  const credentials =
    options.tls === undefined
      ? grpc.ServerCredentials.createInsecure()
      : grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(options.tls.certPem), private_key: Buffer.from(options.tls.keyPem) }]);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', credentials, (err, bound) => (err === null ? resolve(bound) : reject(err))),
  );
  let killed = false;
  return {
    port,
    behaviour,
    requests,
    texts,
    validated,
    kill() {
      killed = true;
      for (const timer of timers) clearTimeout(timer);
      server.forceShutdown();
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      if (!killed) server.forceShutdown();
    },
  };
}
