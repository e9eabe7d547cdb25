// A whole credential-injection test stack: plaintext and TLS origins, counting fronts for the origins no
// credential may reach, a header-echo origin, a watched credentials file and a boundary with a policy over
// them, plus `through()` to send one request by forward HTTP or CONNECT + TLS. Loopback only.

import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FileCredentialSource } from '../../src/credentials/file-source.js';
import { type RunningBoundary, startBoundary } from './boundary.js';
import { makeTestPki, type TestPki } from './certs.js';
import { type CountingFront, countingFront, credentialsFile, nextRevision, writeAtomically } from './credential-parts.js';
import { type ClientResponse, openTunnel, readAll, sendRequest, tlsOverTunnel } from './proxy-client.js';
import { httpOrigin, type Origin, type SeenRequest, tlsOrigin } from './servers.js';

export const HOSTS = {
  api: 'api.example.test',
  rewrite: 'rewrite.example.test',
  l4: 'l4.example.test',
  other: 'other.example.test',
  skip: 'skip.example.test',
  hatch: 'hatch.example.test',
  scoped: 'scoped.example.test',
  echo: 'echo.example.test',
} as const;

export interface StackValues {
  readonly token: string;
  readonly query: string;
  readonly basic: string;
}

export function credentialsYaml(values: StackValues, ports: { plain: number; secure: number; echo: number }, extraEndpoints = ''): string {
  const q = (v: string): string => JSON.stringify(v);
  return `providers:
  acme:
    env:
      API_TOKEN: ${q(values.token)}
      QUERY_KEY: ${q(values.query)}
      BASIC_PASS: ${q(values.basic)}
      SLASHY: "a/b"
    endpoints:
      - { host: ${HOSTS.api}, port: ${ports.plain} }
      - { host: ${HOSTS.api}, port: ${ports.secure} }
      - { host: ${HOSTS.rewrite}, port: ${ports.plain} }
      - { host: ${HOSTS.rewrite}, port: ${ports.secure} }
      - { host: ${HOSTS.l4}, port: ${ports.secure} }
      - { host: ${HOSTS.skip}, port: ${ports.secure} }
      - { host: ${HOSTS.hatch}, port: ${ports.secure} }
      - { host: ${HOSTS.scoped}, port: ${ports.plain}, path: "/v1/**" }
      - { host: ${HOSTS.echo}, port: ${ports.echo} }
${extraEndpoints}`;
}

export function stackPolicy(ports: { plain: number; secure: number; otherPlain: number; otherSecure: number; echo: number }, extra = ''): string {
  const rest = (host: string, list: number[], more = ''): string => `      - host: ${host}
        ports: [${list.join(', ')}]
        protocol: rest
        enforcement: enforce
        access: full
${more}`;
  return `version: 1
network_policies:
  api:
    endpoints:
${rest(HOSTS.api, [ports.plain, ports.secure])}${rest(HOSTS.rewrite, [ports.plain, ports.secure], '        request_body_credential_rewrite: true\n')}${rest(HOSTS.other, [ports.otherPlain, ports.otherSecure])}${rest(HOSTS.scoped, [ports.plain])}${rest(HOSTS.echo, [ports.echo])}      - host: ${HOSTS.l4}
        ports: [${ports.secure}]
      - host: ${HOSTS.skip}
        ports: [${ports.secure}]
        tls: skip
      - host: ${HOSTS.hatch}
        ports: [${ports.secure}]
        tls: skip
        allow_uninspected_credentials: true
${extra}    binaries: [{ path: "/**" }]
`;
}

export type Transport = 'forward' | 'connect';

export interface HeaderEchoOrigin {
  readonly port: number;
  /** What it received; its response bodies never repeat any of it. */
  readonly seen: SeenRequest[];
  close(): Promise<void>;
}

/** An origin that repeats Authorization and X-Api-Key in response headers only (x-echo-*); bodies are `ok`. */
async function headerEchoOrigin(): Promise<HeaderEchoOrigin> {
  const sockets = new Set<Socket>();
  const seen: SeenRequest[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, {
        'x-echo-authorization': req.headers.authorization ?? '',
        'x-echo-api-key': String(req.headers['x-api-key'] ?? ''),
        'content-length': 2,
      });
      res.end('ok');
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    seen,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface RequestSpec {
  readonly method?: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

export interface CredentialStack {
  readonly b: RunningBoundary;
  readonly pki: TestPki;
  readonly plain: Origin;
  readonly secure: Origin;
  readonly otherPlain: Origin;
  readonly otherSecure: Origin;
  /** Fronts of the other origins: the boundary reaches them only through these. */
  readonly frontPlain: CountingFront;
  readonly frontSecure: CountingFront;
  readonly echo: HeaderEchoOrigin;
  readonly source: FileCredentialSource;
  readonly credentialsPath: string;
  /** Rewrites the credentials file with new values and waits until the source made them current. */
  rotate(values: StackValues): Promise<void>;
  readonly values: StackValues;
  readonly ports: { plain: number; secure: number; otherPlain: number; otherSecure: number; echo: number };
  /** The port of `host` for a transport: plaintext for forward, TLS for connect. */
  portFor(host: string, transport: Transport): number;
  /** One request through the boundary: forward HTTP, or CONNECT + TLS (boundary CA) + request. */
  through(transport: Transport, host: string, spec: RequestSpec): Promise<ClientResponse>;
  close(): Promise<void>;
}

export async function credentialStack(options: {
  values: StackValues;
  logFormat?: 'json' | 'shorthand';
  /** More endpoint entries for the `api` policy (YAML lines at endpoint-list indentation). */
  extraPolicy?: string | ((ports: { plain: number; secure: number; echo: number }) => string);
  /** More names for the fake resolver (all 127.0.0.1). */
  extraNames?: readonly string[];
  /** More provider endpoint lines (`      - { host: h, port: p }`), given the stack's ports. */
  extraEndpoints?: (ports: { plain: number; secure: number; echo: number }) => string;
  /** The placeholder family the boundary resolves (`--placeholder-family`). */
  placeholderFamily?: 'openshell' | 'ryno';
}): Promise<CredentialStack> {
  const pki = await makeTestPki();
  const names = [...Object.values(HOSTS), '127.0.0.1'];
  const [plain, secure, otherPlain, otherSecure] = await Promise.all([
    httpOrigin(),
    tlsOrigin({ ca: pki.ca, names }),
    httpOrigin(),
    tlsOrigin({ ca: pki.ca, names }),
  ]);
  const [frontPlain, frontSecure] = await Promise.all([countingFront(otherPlain.port), countingFront(otherSecure.port)]);
  const echo = await headerEchoOrigin();
  const ports = { plain: plain.port, secure: secure.port, otherPlain: frontPlain.port, otherSecure: frontSecure.port, echo: echo.port };
  const dir = await mkdtemp(join(tmpdir(), 'boundary-creds-'));
  const extraEndpoints = options.extraEndpoints?.(ports) ?? '';
  const { path: credentialsPath, source } = await credentialsFile(dir, credentialsYaml(options.values, ports, extraEndpoints));
  const b = await startBoundary({
    policy: stackPolicy(ports, typeof options.extraPolicy === 'function' ? options.extraPolicy(ports) : options.extraPolicy),
    upstreamCaPem: pki.ca.certPem,
    names: Object.fromEntries([...Object.values(HOSTS), ...(options.extraNames ?? [])].map((n) => [n, ['127.0.0.1']])),
    credentials: source,
    ...(options.logFormat === undefined ? {} : { logFormat: options.logFormat }),
    ...(options.placeholderFamily === undefined ? {} : { placeholderFamily: options.placeholderFamily }),
  });
  const portFor = (host: string, transport: Transport): number => {
    const other = host === HOSTS.other;
    if (transport === 'forward') return other ? ports.otherPlain : ports.plain;
    return other ? ports.otherSecure : ports.secure;
  };
  return {
    b,
    pki,
    plain,
    secure,
    otherPlain,
    otherSecure,
    frontPlain,
    frontSecure,
    echo,
    source,
    async rotate(values) {
      const changed = nextRevision(source, source.current().revision);
      await writeAtomically(credentialsPath, credentialsYaml(values, ports, extraEndpoints));
      await changed;
    },
    credentialsPath,
    values: options.values,
    ports,
    portFor,
    async through(transport, host, spec) {
      const port = portFor(host, transport);
      const base = { method: spec.method ?? 'GET', headers: spec.headers ?? {}, ...(spec.body === undefined ? {} : { body: spec.body }) };
      if (transport === 'forward') return sendRequest({ proxyPort: b.proxyPort, path: `http://${host}:${port}${spec.path}`, ...base });
      const tunnel = await openTunnel(b.proxyPort, `${host}:${port}`);
      if (tunnel.status !== 200) {
        const body = await readAll(tunnel.socket, tunnel.rest);
        return { status: tunnel.status, headers: {}, body: body.slice(body.indexOf('\r\n\r\n') + 4) };
      }
      const socket = await tlsOverTunnel(tunnel.socket, { servername: host, ca: b.caPem as string });
      try {
        return await sendRequest({ socket, ...base, path: spec.path, headers: { host: `${host}:${port}`, ...base.headers } });
      } finally {
        socket.destroy();
      }
    },
    async close() {
      await b.close();
      await source.close();
      await Promise.all([plain, secure, otherPlain, otherSecure, frontPlain, frontSecure, echo].map((s) => s.close()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
