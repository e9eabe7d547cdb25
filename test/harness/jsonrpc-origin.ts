// A real JSON-RPC 2.0 server on loopback for proxy tests: the `json-rpc-2.0` library's JSONRPCServer behind
// node:http (plain, or TLS with a test-CA certificate), single calls and batches. Records what arrived, so a test
// can prove a denied request never did.

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { JSONRPCServer } from 'json-rpc-2.0';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { listenTracked, originServer, type RecordedRequest, recordRequest } from './servers.js';

export type JsonRpcSeen = RecordedRequest;

export interface JsonRpcOrigin {
  readonly port: number;
  readonly seen: JsonRpcSeen[];
  close(): Promise<void>;
}

function rpcServer(): JSONRPCServer {
  const server = new JSONRPCServer();
  server.addMethod('initialize', () => ({ serverInfo: { name: 'ledger' } }));
  server.addMethod('tools/list', () => ({ tools: ['a', 'b'] }));
  server.addMethod('tools/call', (params: { name?: string }) => ({ ran: params?.name ?? null }));
  server.addMethod('tools/delete', () => ({ deleted: true }));
  server.addMethod('unknown/method', () => ({ unknown: true }));
  return server;
}

function handler(seen: JsonRpcSeen[], server: JSONRPCServer) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    recordRequest(req, seen, (body) => {
      server.receiveJSON(body).then(
        (answer) => {
          if (answer === null) {
            res.writeHead(204).end();
            return;
          }
          const text = JSON.stringify(answer);
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
        },
        () => res.writeHead(500).end(),
      );
    });
  };
}

async function listen(server: Server, seen: JsonRpcSeen[]): Promise<JsonRpcOrigin> {
  return { seen, ...(await listenTracked(server)) };
}

export async function jsonRpcOrigin(): Promise<JsonRpcOrigin> {
  const seen: JsonRpcSeen[] = [];
  return listen(await originServer(handler(seen, rpcServer())), seen);
}

export async function jsonRpcTlsOrigin(options: { ca: CertificateAuthority }): Promise<JsonRpcOrigin> {
  const seen: JsonRpcSeen[] = [];
  return listen(await originServer(handler(seen, rpcServer()), options), seen);
}
