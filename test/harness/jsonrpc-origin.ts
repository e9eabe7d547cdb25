// A real JSON-RPC 2.0 server on loopback for proxy tests: the `json-rpc-2.0` library's JSONRPCServer behind
// node:http (plain, or TLS with a test-CA certificate), single calls and batches. Records what arrived, so a test
// can prove a denied request never did.

import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { JSONRPCServer } from 'json-rpc-2.0';
import type { CertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { listenTracked } from './servers.js';

export interface JsonRpcSeen {
  readonly method: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

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
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', headers: req.headers, body });
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

export function jsonRpcOrigin(): Promise<JsonRpcOrigin> {
  const seen: JsonRpcSeen[] = [];
  return listen(createHttpServer(handler(seen, rpcServer())), seen);
}

export async function jsonRpcTlsOrigin(options: { ca: CertificateAuthority }): Promise<JsonRpcOrigin> {
  const leaf = await issueCertificate({ ca: options.ca, kind: 'server', names: ['api.example.test', '127.0.0.1'], now: Date.now });
  const seen: JsonRpcSeen[] = [];
  return listen(createHttpsServer({ key: leaf.keyPem, cert: leaf.certPem, ALPNProtocols: ['http/1.1'] }, handler(seen, rpcServer())), seen);
}
