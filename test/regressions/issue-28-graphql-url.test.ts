// Regression of issue 28, "One reading of every request", finding 1: boundary decided a GraphQL POST from its JSON
// body only, while express-graphql (and the servers built like it) take query, operationName and variables from the
// URL first: `POST /graphql?query=mutation{deleteRepository}` with an allowed body ran the denied mutation, and the
// event recorded the allowed query. Now the URL's parameters count on GET and POST; a request carrying them in both
// places, or in any form servers read two ways (a form body, a literal `?`, a repeated or re-spelled parameter, a GET
// body), is refused 400 `ambiguous_graphql_request`; a POST with URL parameters only is decided on them.
// Real origins on loopback: express-graphql's middleware and graphql-http's node handler, each behind boundary.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { graphqlHTTP } from 'express-graphql';
import { buildSchema } from 'graphql';
import { createHandler } from 'graphql-http/lib/use/http';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';
import { listenTracked } from '../harness/servers.js';

const run = promisify(execFile);

const SCHEMA = buildSchema(`
  type Query { viewer: String! adminAuditLog: [String!]! }
  type Mutation { deleteRepository(id: ID!): Boolean! }
`);

/** Every resolver that ran on either origin: the denied ones must never appear. */
const ran: string[] = [];
const ROOT = {
  viewer: () => {
    ran.push('viewer');
    return 'octo';
  },
  adminAuditLog: () => {
    ran.push('adminAuditLog');
    return ['secret-entry'];
  },
  deleteRepository: () => {
    ran.push('deleteRepository');
    return true;
  },
};
const DENIED = ['deleteRepository', 'adminAuditLog'];

const policy = (ports: readonly number[]): string => `version: 1
network_policies:
  github_graphql:
    endpoints:
      - host: api.example.test
        ports: [${ports.join(', ')}]
        path: /graphql
        protocol: graphql
        enforcement: enforce
        rules:
          - allow: { operation_type: query, fields: [viewer] }
        deny_rules:
          - { operation_type: mutation, fields: [deleteRepository] }
    binaries: [{ path: "/**" }]
`;

interface Reply {
  readonly code: number;
  readonly body: string;
}

interface Origin {
  readonly port: number;
  close(): Promise<void>;
}

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<Origin> {
  return listenTracked(createServer((req, res) => void handler(req, res)));
}

const enc = encodeURIComponent;
const MUTATION = 'mutation { deleteRepository(id: 1) }';
const VIEWER = '{ viewer }';

describe('issue 28: GraphQL parameters in the URL count, and a request read two ways is refused', { timeout: SUITE_TIMEOUT_MS }, () => {
  let b: RunningBoundary;
  const origins: Record<string, Origin> = {};

  before(async () => {
    origins['express-graphql'] = await serve(graphqlHTTP({ schema: SCHEMA, rootValue: ROOT }) as (req: IncomingMessage, res: ServerResponse) => Promise<void>);
    origins['graphql-http'] = await serve(createHandler({ schema: SCHEMA, rootValue: ROOT }));
    b = await startBoundary({ policy: policy(Object.values(origins).map((o) => o.port)) });
  });

  after(async () => {
    await b?.close();
    await Promise.all(Object.values(origins).map((o) => o.close()));
  });

  for (const name of ['express-graphql', 'graphql-http']) {
    /** curl through boundary's forward proxy; `query` is the raw query string, sent as written (-g: no globbing). */
    const ask = async (method: string, query: string, body?: string, contentType = 'application/json'): Promise<Reply> => {
      const url = `http://api.example.test:${origins[name]?.port}/graphql${query === '' ? '' : `?${query}`}`;
      const data = body === undefined ? [] : ['-H', `content-type: ${contentType}`, '--data-binary', body];
      const args = ['-sS', '-g', '--max-time', '10', '-x', `http://127.0.0.1:${b.proxyPort}`, '-X', method, '-w', '\n%{http_code}', ...data, url];
      const { stdout } = await run('curl', args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
      const cut = stdout.lastIndexOf('\n');
      return { body: stdout.slice(0, cut), code: Number(stdout.slice(cut + 1)) };
    };
    const port = (): number => origins[name]?.port ?? 0;
    const seen = new Set<OcsfEvent>();
    /** The one decision event of the request just answered (by port and reason), never one seen before. */
    const eventOf = async (reason: string): Promise<OcsfEvent> => {
      const event = await b.log.waitFor((e) => e.class_uid === 4002 && e.dst_endpoint?.port === port() && e.unmapped.reason_code === reason && !seen.has(e));
      seen.add(event);
      return event;
    };
    let refusals = 0;
    /** 400 ambiguous_graphql_request, a client fix as the next step, one denied event, and no denied resolver ran. */
    const ambiguous = async (reply: Reply): Promise<void> => {
      refusals++;
      assert.equal(reply.code, 400, reply.body);
      const body = JSON.parse(reply.body) as { error: string; reason: string; next_steps: { kind: string }[] };
      assert.equal(body.error, 'ambiguous_graphql_request');
      assert.equal(body.reason, 'graphql-ambiguous');
      assert.deepEqual(body.next_steps.map((s) => s.kind), ['fix_request']);
      const event = await eventOf('graphql-ambiguous');
      assert.equal(event.action, 'Denied');
      assert.equal(event.unmapped.status_code, 400);
      assert.deepEqual(ran.filter((r) => DENIED.includes(r)), []);
    };

    describe(name, () => {
      it('relays an allowed query, POSTed as JSON or sent as a GET', async () => {
        const post = await ask('POST', '', JSON.stringify({ query: VIEWER }));
        assert.equal(post.code, 200, post.body);
        assert.deepEqual(JSON.parse(post.body), { data: { viewer: 'octo' } });
        const get = await ask('GET', `query=${enc(VIEWER)}`);
        assert.equal(get.code, 200, get.body);
        assert.deepEqual(JSON.parse(get.body), { data: { viewer: 'octo' } });
      });

      it('refuses a POST whose URL names a denied mutation beside an allowed JSON body', async () => {
        await ambiguous(await ask('POST', `query=${enc(MUTATION)}`, JSON.stringify({ query: VIEWER })));
      });

      it('refuses ?operationName= choosing the denied operation of the body\'s two-operation document', async () => {
        const document = 'query A { viewer } mutation B { deleteRepository(id: 1) }';
        await ambiguous(await ask('POST', 'operationName=B', JSON.stringify({ query: document, operationName: 'A' })));
      });

      it('refuses a body that is JSON to boundary and a form to the server (x-www-form-urlencoded)', async () => {
        const polyglot = JSON.stringify({ query: VIEWER, x: '&query=mutation{deleteRepository(id:1)}#' });
        await ambiguous(await ask('POST', '', polyglot, 'application/x-www-form-urlencoded'));
      });

      it('refuses a literal "?" in the query string: servers that stop at it run a different document', async () => {
        // Before the `?` a denied field; after it, a comment's end and a second fragment F that boundary read as the one.
        const head = enc('query Q { ...F } fragment F on Query { adminAuditLog } #');
        await ambiguous(await ask('GET', `query=${head}?${enc('\nfragment F on Query { viewer }')}`));
      });

      it('refuses a GET with a body, a repeated parameter and a parameter spelled in another case', async () => {
        await ambiguous(await ask('GET', `query=${enc(VIEWER)}`, JSON.stringify({ query: '{ adminAuditLog }' })));
        await ambiguous(await ask('GET', `query=${enc(VIEWER)}&query=${enc('{ adminAuditLog }')}`));
        await ambiguous(await ask('GET', `query=${enc(VIEWER)}&Query=${enc('{ adminAuditLog }')}`));
      });

      it('decides a POST with URL parameters only on them: a denied mutation is 403 and its event names it', async () => {
        const reply = await ask('POST', `query=${enc(MUTATION)}`);
        assert.equal(reply.code, 403, reply.body);
        assert.equal((JSON.parse(reply.body) as { reason: string }).reason, 'deny-rule-matched');
        const event = await eventOf('deny-rule-matched');
        assert.match(String(event.unmapped.reason ?? event.status_detail), /deleteRepository/);
        assert.deepEqual(ran.filter((r) => DENIED.includes(r)), []);
      });

      it('allows a POST with an allowed query in the URL only, and records that query as what the origin runs', async () => {
        const reply = await ask('POST', `query=${enc(VIEWER)}`);
        // express-graphql runs the URL's query; graphql-http reads POST bodies only and refuses the request.
        if (name === 'express-graphql') assert.deepEqual(JSON.parse(reply.body), { data: { viewer: 'octo' } });
        else assert.notEqual(reply.code, 200, reply.body);
        const event = await eventOf('rule-allowed');
        assert.match(String(event.unmapped.reason), /query - \{viewer\}/);
      });

      it('wrote exactly one decision event per refused request', () => {
        const events = b.log.decisions().filter((e) => e.dst_endpoint?.port === port() && e.unmapped.reason_code === 'graphql-ambiguous');
        assert.equal(events.length, refusals);
      });
    });
  }
});
