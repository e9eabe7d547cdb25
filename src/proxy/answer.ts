// Writes a denial (chain/denials.ts) in HTTP/1.1: on a raw socket (a connection refused at admission, CONNECT before any 200, a refused upgrade) or
// through the HTTP/1.1 server's answer (http1/h1-server.ts), with `Connection: close` unless the request was read whole; and the lingering close for an
// answer sent while the request body still arrives. Bytes only; never decides anything.

import { STATUS_CODES } from '../shared/node-http.js';
import type { Socket } from 'node:net';
import type { Denial } from '../chain/denials.js';
import { POLICY_HEADER } from '../http1/headers.js';
import type { H1Answer, H1IncomingRequest } from '../http1/h1-server.js';
import { destroyAfterLinger } from './linger.js';

/** The whole response as bytes, for sockets with no HTTP machinery attached; `peer` names the policy a second time. */
export function renderDenial(d: Denial, peer?: string): string {
  const body = JSON.stringify(d.body);
  const policy = d.policy === undefined ? '' : `${POLICY_HEADER}: ${d.policy}\r\n${peer === undefined ? '' : `${peer}: ${d.policy}\r\n`}`;
  const retry = d.retryAfterSeconds === undefined ? '' : `retry-after: ${d.retryAfterSeconds}\r\n`;
  const allow = d.allow === undefined ? '' : `allow: ${d.allow}\r\n`;
  return (
    `HTTP/1.1 ${d.status} ${d.reasonPhrase}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n${policy}${retry}${allow}${d.keepAlive === true ? '' : 'connection: close\r\n'}\r\n${body}`
  );
}

export function writeDenialToSocket(socket: Socket, d: Denial, peer?: string): void {
  lastAnswer(socket, renderDenial(d, peer));
}

/** A bare status with no body (400/431 for malformed or oversized heads). */
export function writeBareStatusToSocket(socket: Socket, status: number): void {
  lastAnswer(socket, `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
}

/**
 * The last bytes on a socket no HTTP machinery reads (a connection refused at admission, a CONNECT or an upgrade handed
 * over): what the client sends from here is read and dropped, so its FIN is seen and the half-open socket closes, and
 * the linger bounds a client that neither closes nor reads. Unread, a byte the client sent would keep the FIN from ever
 * being seen (issues 15 and 33).
 */
function lastAnswer(socket: Socket, bytes: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(bytes);
  socket.resume();
  destroyAfterLinger(socket);
}

export function sendDenial(res: H1Answer, d: Denial, peer?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(d.body);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  };
  if (d.keepAlive !== true) headers.connection = 'close';
  if (d.policy !== undefined) headers[POLICY_HEADER] = d.policy;
  if (d.policy !== undefined && peer !== undefined) headers[peer] = d.policy;
  if (d.retryAfterSeconds !== undefined) headers['retry-after'] = d.retryAfterSeconds;
  if (d.allow !== undefined) headers.allow = d.allow;
  res.writeHead(d.status, headers, d.reasonPhrase);
  res.end(body);
}

/**
 * Lingering close (linger.ts) for `res`, sent while its request body is still arriving: when the answer ends the
 * connection, its socket half-closes, reads and drops the rest, and is destroyed when the client closes or after
 * LINGER_MS.
 */
export function lingerAfterAnswer(req: H1IncomingRequest, res: H1Answer): void {
  if (req.complete || res.socket === undefined) return;
  // The body's reader may have stopped mid-body (a held body refused): what is left of it is read and dropped.
  req.discard();
  res.closeWith = lingeringClose;
}

function lingeringClose(socket: Socket): void {
  socket.end();
  destroyAfterLinger(socket);
  socket.once('end', () => socket.destroy());
}

export function sendBareStatus(res: H1Answer, status: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-length': 0, connection: 'close' });
  res.end();
}
