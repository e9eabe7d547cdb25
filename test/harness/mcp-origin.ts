// A real MCP server on loopback for proxy tests: the MCP SDK's McpServer behind its Streamable HTTP transport
// (sessions with Mcp-Session-Id, the GET SSE stream, DELETE), plain HTTP or TLS with a test-CA certificate.
// Answers POSTs over SSE by default, as JSON with `json: true`. Records every request that arrived, so a test
// can prove a denied one never did, and the session ids it ended. With `resumeToolsList: true` it keeps its events
// (the SDK's event store) and closes a tools/list call's POST stream before answering, so the answer reaches the
// client on the GET it resumes with Last-Event-ID. With `revision` it negotiates that protocol revision.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { type JSONRPCMessage, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { listenTracked, originServer, type RecordedRequest, recordRequest } from './servers.js';

/** The tools the server offers: a policy allows some of them. */
export const MCP_TOOLS = ['read_status', 'search_web', 'submit_report', 'delete_resource', 'admin.purge'] as const;

export type McpSeen = RecordedRequest;

export interface McpOrigin {
  readonly port: number;
  readonly seen: McpSeen[];
  /** Session ids a DELETE ended. */
  readonly ended: string[];
  /** Tool calls the server ran, by name. */
  readonly calls: string[];
  /** Sends a server notification (a log message) to one session: it travels on that session's GET stream. */
  notify(sessionId: string, text: string): Promise<void>;
  close(): Promise<void>;
}

type Sessions = Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>;

/** `resuming`: the transport whose tools/list POST streams are closed before the answer (see resumeToolsList). */
function mcpServer(calls: string[], resuming: StreamableHTTPServerTransport | undefined): McpServer {
  const server = new McpServer({ name: 'boundary-test-mcp', version: '1.0.0' }, { capabilities: { logging: {} } });
  for (const name of MCP_TOOLS) {
    server.registerTool(name, { description: `the ${name} tool`, inputSchema: { scope: z.string().optional() } }, async ({ scope }) => {
      calls.push(name);
      return { content: [{ type: 'text', text: `${name} ran${scope === undefined ? '' : ` on ${scope}`}` }] };
    });
  }
  if (resuming !== undefined) {
    server.server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
      resuming.closeSSEStream(extra.requestId);
      return { tools: MCP_TOOLS.map((name) => ({ name, description: `the ${name} tool`, inputSchema: { type: 'object' as const } })) };
    });
  }
  return server;
}

/**
 * An event store that replays in the order events were stored. The SDK's example store orders event ids
 * `<stream>_<ms>_<random>` as strings, so a stream's priming event and the answer stored in the same millisecond
 * replay in random order, and an answer sorted before the client's Last-Event-ID is never sent.
 */
function orderedEventStore(): EventStore {
  const events: { readonly id: string; readonly stream: string; readonly message: JSONRPCMessage }[] = [];
  const streamOf = new Map<string, string>();
  return {
    async storeEvent(stream, message) {
      const id = `${stream}:${events.length}`;
      events.push({ id, stream, message });
      streamOf.set(id, stream);
      return id;
    },
    async getStreamIdForEventId(id) {
      return streamOf.get(id);
    },
    async replayEventsAfter(lastId, { send }) {
      const stream = streamOf.get(lastId);
      if (stream === undefined) return '';
      const from = events.findIndex((e) => e.id === lastId) + 1;
      for (const e of events.slice(from)) if (e.stream === stream) await send(e.id, e.message);
      return stream;
    },
  };
}

function handler(seen: McpSeen[], ended: string[], calls: string[], sessions: Sessions, options: Options) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    recordRequest(req, seen, (body) => {
      const sessionId = req.headers['mcp-session-id'];
      const existing = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      const parsed = body === '' ? undefined : (JSON.parse(body) as unknown);
      // The SDK server answers initialize with the revision the client asked for when it speaks it: asked for this one.
      if (options.revision !== undefined && isInitialize(parsed)) parsed.params.protocolVersion = options.revision;
      if (existing !== undefined) {
        if (req.method === 'DELETE' && typeof sessionId === 'string') ended.push(sessionId);
        void existing.transport.handleRequest(req, res, parsed);
        return;
      }
      const resume = options.resumeToolsList === true;
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: options.json === true,
        // The client reconnects after `retry` ms: the smallest, so the test waits on the resumed answer, not a delay.
        ...(resume ? { eventStore: orderedEventStore(), retryInterval: 1 } : {}),
        onsessioninitialized: (id) => {
          sessions.set(id, { transport, server });
        },
      });
      transport.onclose = () => {
        if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
      };
      const server = mcpServer(calls, resume ? transport : undefined);
      void server.connect(transport).then(() => transport.handleRequest(req, res, parsed));
    });
  };
}

function isInitialize(message: unknown): message is { method: 'initialize'; params: { protocolVersion: string } } {
  const m = message as { method?: unknown; params?: unknown } | undefined;
  return m?.method === 'initialize' && typeof m.params === 'object' && m.params !== null;
}

interface Options {
  /** Answer POSTs with JSON bodies instead of SSE streams. */
  readonly json?: boolean;
  /** Negotiate this MCP protocol revision with every client (one the SDK speaks), instead of the SDK's latest. */
  readonly revision?: string;
  /** Answer tools/list only on the GET stream the client resumes after its POST stream was closed. */
  readonly resumeToolsList?: boolean;
}

async function start(server: Server, seen: McpSeen[], ended: string[], calls: string[], sessions: Sessions): Promise<McpOrigin> {
  const listening = await listenTracked(server);
  return {
    port: listening.port,
    seen,
    ended,
    calls,
    async notify(sessionId: string, text: string) {
      await sessions.get(sessionId)?.server.sendLoggingMessage({ level: 'info', data: text });
    },
    async close() {
      await Promise.all([...sessions.values()].map((s) => s.transport.close()));
      await listening.close();
    },
  };
}

/** `tls`: a leaf for `names` (default api.example.test) and 127.0.0.1 from `ca`; cleartext without it. */
async function mcpOriginOn(options: Options, tls?: { ca: CertificateAuthority; names?: readonly string[] }): Promise<McpOrigin> {
  const seen: McpSeen[] = [];
  const ended: string[] = [];
  const calls: string[] = [];
  const sessions: Sessions = new Map();
  const leaf = tls === undefined ? undefined : { ca: tls.ca, names: [...(tls.names ?? ['api.example.test']), '127.0.0.1'] };
  const server = await originServer(handler(seen, ended, calls, sessions, options), leaf);
  return start(server, seen, ended, calls, sessions);
}

export function mcpOrigin(options: Options = {}): Promise<McpOrigin> {
  return mcpOriginOn(options);
}

export function mcpTlsOrigin(options: Options & { ca: CertificateAuthority; names?: readonly string[] }): Promise<McpOrigin> {
  return mcpOriginOn(options, options);
}
