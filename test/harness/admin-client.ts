// Clients for the supervisor's admin listener in tests: real socat through CONNECT, raw CONNECT requests that
// return the exact answer head, and plain/upgrade requests over HTTP or HTTPS with optional credentials.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';

export const SOCAT = '/usr/bin/socat';
export const SKIP_SOCAT = existsSync(SOCAT) ? false : `socat is not installed at ${SOCAT} (apt-get install socat); the raw CONNECT cases still run`;
/** Upper bound on a CONNECT answer's head; ours are a few hundred bytes. */
const MAX_HEAD_BYTES = 16_384;

export interface SocatResult {
  readonly code: number | null;
  readonly stdout: Buffer;
  readonly stderr: string;
}

/**
 * Runs socat through the admin listener (with `proxyauth=operator:<token>` when a token is given), feeds
 * `input` on stdin (then EOF) and collects what comes back.
 */
export async function runSocat(adminPort: number, token: string | undefined, target: string, input: Buffer): Promise<SocatResult> {
  const auth = token === undefined ? '' : `,proxyauth=operator:${token}`;
  const child = spawn(SOCAT, ['-', `PROXY:127.0.0.1:${target},proxyport=${adminPort}${auth}`], { stdio: ['pipe', 'pipe', 'pipe'] });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  child.stdin.on('error', () => undefined);
  const exited = once(child, 'close') as Promise<[number | null]>;
  if (input.length > 0) {
    // Echoed bytes arrive before stdin closes, so the whole round trip is checked, not just the first half.
    let seen = 0;
    const echoed = new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen >= input.length) resolve();
      });
      child.once('close', () => resolve());
    });
    child.stdin.write(input);
    await echoed;
  }
  child.stdin.end();
  const [code] = await exited;
  return { code, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr).toString() };
}

/** Sends a raw CONNECT (over TLS when `tls` is given) and returns the answer's head; the socket stays open for a 200. */
export async function rawConnect(
  adminPort: number,
  target: string,
  headers: readonly string[] = [],
  tls?: ConnectionOptions,
): Promise<{ head: string; socket: Socket }> {
  const socket = tls === undefined ? netConnect({ host: '127.0.0.1', port: adminPort }) : tlsConnect({ host: '127.0.0.1', port: adminPort, ...tls });
  await once(socket, tls === undefined ? 'connect' : 'secureConnect');
  socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`);
  let buffered = Buffer.alloc(0);
  const head = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end >= 0) {
        socket.off('data', onData);
        resolve(buffered.subarray(0, end).toString('latin1'));
      } else if (buffered.length > MAX_HEAD_BYTES) reject(new Error('CONNECT answer head too long'));
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('end', () => reject(new Error(`connection ended before a full answer: ${JSON.stringify(buffered.toString('latin1'))}`)));
  });
  return { head, socket };
}

export function statusLine(head: string): string {
  return head.split('\r\n', 1)[0] ?? '';
}


export interface AdminReply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
  /** Set when the request was upgraded (101); the caller owns it. */
  readonly socket?: Socket;
}

/** One request to the admin listener (HTTPS when `tls` is given); resolves on the response or the upgrade. */
export function adminRequest(options: {
  port: number;
  method: string;
  path: string;
  headers?: Readonly<Record<string, string>>;
  tls?: ConnectionOptions;
}): Promise<AdminReply> {
  const common = { host: '127.0.0.1', port: options.port, method: options.method, path: options.path, headers: { ...options.headers }, agent: false };
  const req = options.tls === undefined ? httpRequest(common) : httpsRequest({ ...common, ...options.tls });
  return new Promise((resolve, reject) => {
    req.on('upgrade', (res, socket) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: {}, socket }));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) });
      });
    });
    req.on('error', reject);
    req.end();
  });
}
