// A real GraphQL server on loopback for proxy tests: graphql-js executes every document against a small
// GitHub-like schema (plain HTTP or TLS with a test-CA certificate), GET and POST, batches, and persisted
// queries by sha256 (Apollo APQ). Records what arrived so a test can prove a denied request never did.

import { createHash } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { buildSchema, graphql } from 'graphql';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { listenTracked, originServer, type RecordedRequest, recordRequest } from './servers.js';

const SCHEMA = buildSchema(`
  type User { login: String! }
  type Repository { id: ID! name: String! }
  type Issue { id: ID! title: String! }
  type Query { viewer: User! repository(owner: String!, name: String!): Repository adminAuditLog: [String!]! }
  type Mutation { createIssue(title: String!): Issue! deleteRepository(id: ID!): Boolean! }
`);

const ROOT = {
  viewer: () => ({ login: 'octo' }),
  repository: ({ owner, name }: { owner: string; name: string }) => ({ id: `${owner}/${name}`, name }),
  adminAuditLog: () => ['secret-entry'],
  createIssue: ({ title }: { title: string }) => ({ id: '1', title }),
  deleteRepository: () => true,
};

export type GraphqlSeen = RecordedRequest;

export interface GraphqlOrigin {
  readonly port: number;
  readonly seen: GraphqlSeen[];
  close(): Promise<void>;
}

/** sha256 hex of a document, as Apollo's persisted queries name it. */
export function persistedHash(document: string): string {
  return createHash('sha256').update(document).digest('hex');
}

interface Envelope {
  query?: string | undefined;
  operationName?: string | undefined;
  variables?: Record<string, unknown>;
  extensions?: { persistedQuery?: { sha256Hash?: string } } | undefined;
}

async function execute(env: Envelope, registry: ReadonlyMap<string, string>): Promise<unknown> {
  const source = env.query ?? registry.get(env.extensions?.persistedQuery?.sha256Hash ?? '');
  if (source === undefined) return { errors: [{ message: 'PersistedQueryNotFound' }] };
  return graphql({ schema: SCHEMA, source, rootValue: ROOT, operationName: env.operationName ?? null, variableValues: env.variables ?? null });
}

function handler(seen: GraphqlSeen[], registry: ReadonlyMap<string, string>) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    recordRequest(req, seen, (body) => {
      const run = async (): Promise<unknown> => {
        if (req.method === 'GET') {
          const q = new URL(req.url ?? '/', 'http://x').searchParams;
          const ext = q.get('extensions');
          return execute({ query: q.get('query') ?? undefined, operationName: q.get('operationName') ?? undefined, extensions: ext === null ? undefined : JSON.parse(ext) }, registry);
        }
        const parsed = JSON.parse(body) as Envelope | Envelope[];
        return Array.isArray(parsed) ? Promise.all(parsed.map((e) => execute(e, registry))) : execute(parsed, registry);
      };
      run().then(
        (result) => {
          const text = JSON.stringify(result);
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
          res.end(text);
        },
        (err: unknown) => {
          res.writeHead(400, { 'content-type': 'text/plain' });
          res.end(String(err));
        },
      );
    });
  };
}

async function listen(server: Server, seen: GraphqlSeen[]): Promise<GraphqlOrigin> {
  return { seen, ...(await listenTracked(server)) };
}

/** `persisted`: documents the server knows by hash (the registry a client's hash-only request relies on). */
export async function graphqlOrigin(options: { persisted?: readonly string[] } = {}): Promise<GraphqlOrigin> {
  const seen: GraphqlSeen[] = [];
  return listen(await originServer(handler(seen, registryOf(options.persisted))), seen);
}

export async function graphqlTlsOrigin(options: { ca: CertificateAuthority; persisted?: readonly string[] }): Promise<GraphqlOrigin> {
  const seen: GraphqlSeen[] = [];
  return listen(await originServer(handler(seen, registryOf(options.persisted)), options), seen);
}

function registryOf(documents: readonly string[] = []): ReadonlyMap<string, string> {
  return new Map(documents.map((d) => [persistedHash(d), d]));
}
