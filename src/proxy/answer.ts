// Writes a denial (chain/denials.ts) in HTTP/1.1: on a raw socket (CONNECT before any 200, a refused upgrade) or
// through a ServerResponse, with `Connection: close` unless the request was read whole; and the lingering close for an
// answer sent while the request body still arrives. Bytes only; never decides anything.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { STATUS_CODES } from '../shared/node-http.js';
import type { Socket } from 'node:net';
import type { Denial } from '../chain/denials.js';
import { POLICY_HEADER } from '../http1/headers.js';
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
  if (socket.writable) socket.end(renderDenial(d, peer));
  else socket.destroy();
}

/** A bare status with no body (400/431 for malformed or oversized heads). */
export function writeBareStatusToSocket(socket: Socket, status: number): void {
  if (socket.writable) socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
  else socket.destroy();
}

export function sendDenial(res: ServerResponse, d: Denial, peer?: string): void {
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
  res.writeHead(d.status, d.reasonPhrase, headers);
  res.end(body);
}

/**
 * Lingering close (linger.ts) for `res`, sent while its request body is still arriving: once node:http ends
 * the connection, its socket half-closes, reads and drops the rest, and is destroyed when the client closes
 * or after LINGER_MS.
 */
export function lingerAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  const socket = res.socket;
  if (req.complete || !socket) return;
  // The body's reader may have stopped mid-body (a held body refused): drop its 'readable' listener so
  // a 'data' listener makes the request flow again, and what is left of the body is read and dropped.
  req.removeAllListeners('readable');
  req.on('data', () => {});
  // node:http ends a `connection: close` answer with destroySoon(), which destroys the socket as soon as
  // its FIN is written: this socket only half-closes, and lingers.
  socket.destroySoon = () => {
    socket.end();
    destroyAfterLinger(socket);
    socket.once('end', () => socket.destroy());
  };
}

export function sendBareStatus(res: ServerResponse, status: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-length': 0, connection: 'close' });
  res.end();
}
