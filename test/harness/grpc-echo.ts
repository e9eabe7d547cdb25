// A real @grpc/grpc-js server and client for fixtures/grpc/echo.proto: TLS with a certificate from the test CA
// (or cleartext), the four call shapes, and the `authorization` metadata echoed back in every answer.

import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';

const PROTO = join(import.meta.dirname, '../../fixtures/grpc/echo.proto');

export interface Note {
  text: string;
  auth?: string;
}

type Service = grpc.ServiceClientConstructor & { service: grpc.ServiceDefinition };

function echoService(): Service {
  const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as { boundary: { test: { Echo: Service } } };
  return pkg.boundary.test.Echo;
}

export interface GrpcEcho {
  readonly port: number;
  /** Full method paths the server was called on, in order. */
  readonly calls: string[];
  /** The `authorization` metadata of each unary call, as the server received it. */
  readonly auths: string[];
  close(): Promise<void>;
}

function authOf(metadata: grpc.Metadata): string {
  return String(metadata.get('authorization')[0] ?? '');
}

/** A gRPC Echo server on 127.0.0.1:0, TLS for `names` from `ca`, or cleartext without a CA. */
export async function grpcEchoServer(options: { ca?: CertificateAuthority; names?: readonly string[] } = {}): Promise<GrpcEcho> {
  const Echo = echoService();
  const calls: string[] = [];
  const auths: string[] = [];
  const server = new grpc.Server();
  const record = (name: string): void => {
    calls.push(`/boundary.test.Echo/${name}`);
  };
  server.addService(Echo.service, {
    Unary(call: grpc.ServerUnaryCall<Note, Note>, done: grpc.sendUnaryData<Note>) {
      record('Unary');
      auths.push(authOf(call.metadata));
      done(null, { text: `unary:${call.request.text}`, auth: authOf(call.metadata) });
    },
    ServerStream(call: grpc.ServerWritableStream<Note, Note>) {
      record('ServerStream');
      for (let i = 0; i < 3; i++) call.write({ text: `${call.request.text}:${i}`, auth: authOf(call.metadata) });
      call.end();
    },
    ClientStream(call: grpc.ServerReadableStream<Note, Note>, done: grpc.sendUnaryData<Note>) {
      record('ClientStream');
      const texts: string[] = [];
      call.on('data', (n: Note) => texts.push(n.text));
      call.on('end', () => done(null, { text: texts.join('+'), auth: authOf(call.metadata) }));
    },
    Bidi(call: grpc.ServerDuplexStream<Note, Note>) {
      record('Bidi');
      call.on('data', (n: Note) => call.write({ text: `echo:${n.text}`, auth: authOf(call.metadata) }));
      call.on('end', () => call.end());
    },
    Forbidden(_call: grpc.ServerUnaryCall<Note, Note>, done: grpc.sendUnaryData<Note>) {
      record('Forbidden');
      done(null, { text: 'should never run', auth: '' });
    },
  });
  let credentials = grpc.ServerCredentials.createInsecure();
  if (options.ca !== undefined) {
    const cert = await issueCertificate({ ca: options.ca, kind: 'server', names: options.names ?? ['api.example.test', '127.0.0.1'], now: Date.now });
    credentials = grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(cert.certPem), private_key: Buffer.from(cert.keyPem) }]);
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', credentials, (err, bound) => (err === null ? resolve(bound) : reject(err)));
  });
  return {
    port,
    calls,
    auths,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}

export interface EchoClient {
  unary(text: string, metadata?: Record<string, string>): Promise<Note>;
  serverStream(text: string): Promise<Note[]>;
  clientStream(texts: readonly string[]): Promise<Note>;
  /** Sends each text only after the answer to the one before arrived: a held body would never be answered. */
  bidi(texts: readonly string[]): Promise<Note[]>;
  forbidden(text: string): Promise<Note>;
  close(): void;
}

/**
 * A client for `target` (`dns:host:port`, `ipv4:a.b.c.d:port`): TLS trusting `caPem` when given, `authority` as
 * the TLS name and `:authority`; `options` are extra channel options (`grpc.http_connect_target` for a proxy).
 */
export function echoClient(target: string, options: { caPem?: string; authority?: string; channel?: grpc.ChannelOptions } = {}): EchoClient {
  const Echo = echoService();
  const credentials = options.caPem === undefined ? grpc.credentials.createInsecure() : grpc.credentials.createSsl(Buffer.from(options.caPem));
  const name = options.authority?.replace(/:\d+$/, '');
  const client = new Echo(target, credentials, {
    ...(name === undefined ? {} : { 'grpc.ssl_target_name_override': name, 'grpc.default_authority': options.authority }),
    ...options.channel,
  }) as unknown as grpc.Client & Record<'Unary' | 'ServerStream' | 'ClientStream' | 'Bidi' | 'Forbidden', (...args: unknown[]) => unknown>;
  const meta = (entries: Record<string, string> = {}): grpc.Metadata => {
    const m = new grpc.Metadata();
    for (const [k, v] of Object.entries(entries)) m.set(k, v);
    return m;
  };
  const deadline = (): Date => new Date(Date.now() + 10_000);
  return {
    unary(text, metadata) {
      return new Promise((resolve, reject) => {
        client.Unary({ text }, meta(metadata), { deadline: deadline() }, (err: grpc.ServiceError | null, note: Note) => (err === null ? resolve(note) : reject(err)));
      });
    },
    serverStream(text) {
      return new Promise((resolve, reject) => {
        const notes: Note[] = [];
        const call = client.ServerStream({ text }, meta(), { deadline: deadline() }) as grpc.ClientReadableStream<Note>;
        call.on('data', (n: Note) => notes.push(n));
        call.on('error', reject);
        call.on('end', () => resolve(notes));
      });
    },
    clientStream(texts) {
      return new Promise((resolve, reject) => {
        const call = client.ClientStream(meta(), { deadline: deadline() }, (err: grpc.ServiceError | null, note: Note) =>
          err === null ? resolve(note) : reject(err),
        ) as grpc.ClientWritableStream<Note>;
        for (const text of texts) call.write({ text });
        call.end();
      });
    },
    bidi(texts) {
      return new Promise((resolve, reject) => {
        const notes: Note[] = [];
        const call = client.Bidi(meta(), { deadline: deadline() }) as grpc.ClientDuplexStream<Note, Note>;
        let next = 0;
        const send = (): void => {
          if (next < texts.length) call.write({ text: texts[next++] ?? '' });
          else call.end();
        };
        call.on('data', (n: Note) => {
          notes.push(n);
          send();
        });
        call.on('error', reject);
        call.on('end', () => resolve(notes));
        send();
      });
    },
    forbidden(text) {
      return new Promise((resolve, reject) => {
        client.Forbidden({ text }, meta(), { deadline: deadline() }, (err: grpc.ServiceError | null, note: Note) => (err === null ? resolve(note) : reject(err)));
      });
    },
    close() {
      client.close();
    },
  };
}
