// The identity socket's messages (docs/identity.md#the-identity-socket): one JSON object per line, a lookup request
// from boundary and its answer from `boundary identity serve`, each validated field by field and bounded. Pure:
// bytes and objects; socket-source.ts and server.ts own the sockets.

import { BoundaryError } from '../shared/errors.js';
import { type Distrusted, IDENTITY_FAILURES, type IdentityFailure } from '../policy/binary-identity.js';
import type { IdentityResult, LookupRequest, ProcessIdentity, SocketEnd, SocketRef } from './source.js';
import { MAX_IDENTITY_PATH_BYTES } from './source.js';

/** One message, newline included: a request with the most paths allowed, or an answer naming them all, fits. */
export const MAX_IDENTITY_MESSAGE_BYTES = 131_072;
/** Paths and globs per request, and holders, ancestors, argv paths, resolved pairs and verified paths per answer. */
export const MAX_IDENTITY_LIST = 128;
/** uid_t is 32 bits; (uid_t)-1 is never a process's. */
const MAX_UID = 2 ** 32 - 2;

const NEWLINE = 0x0a;

export interface WireRequest extends LookupRequest {
  readonly id: number;
}

export interface WireAnswer {
  readonly id: number;
  readonly result: IdentityResult;
}

function invalid(message: string): BoundaryError {
  return new BoundaryError('IDENTITY_MESSAGE_INVALID', message);
}

function object(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`${what}: expected an object`);
  return value as Record<string, unknown>;
}

function integer(value: unknown, what: string, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > max) throw invalid(`${what}: expected an integer 0-${max}`);
  return value;
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0 || Buffer.byteLength(value) > MAX_IDENTITY_PATH_BYTES) throw invalid(`${what}: expected a string of 1-${MAX_IDENTITY_PATH_BYTES} bytes`);
  return value;
}

function list<T>(value: unknown, what: string, item: (v: unknown, where: string) => T): T[] {
  if (!Array.isArray(value) || value.length > MAX_IDENTITY_LIST) throw invalid(`${what}: expected a list of at most ${MAX_IDENTITY_LIST}`);
  return value.map((v, i) => item(v, `${what}[${i}]`));
}

function end(value: unknown, what: string): SocketEnd {
  const raw = object(value, what);
  return { ip: text(raw.ip, `${what}.ip`), port: integer(raw.port, `${what}.port`, 65_535) };
}

/** One line: the message as JSON and its newline; MESSAGE_TOO_LARGE past the bound (the sender's bug). */
export function encodeLine(message: WireRequest | WireAnswer): Buffer {
  const line = Buffer.from(`${JSON.stringify(message)}\n`);
  if (line.byteLength > MAX_IDENTITY_MESSAGE_BYTES) throw new BoundaryError('MESSAGE_TOO_LARGE', `identity message of ${line.byteLength} bytes exceeds ${MAX_IDENTITY_MESSAGE_BYTES}`);
  return line;
}

function parse(line: Buffer): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = JSON.parse(line.toString('utf8'));
  } catch {
    throw invalid('not JSON');
  }
  return object(raw, 'message');
}

function socketRef(value: unknown, what: string): SocketRef {
  const raw = object(value, what);
  return { inode: integer(raw.inode, `${what}.inode`, Number.MAX_SAFE_INTEGER), uid: integer(raw.uid, `${what}.uid`, MAX_UID) };
}

export function decodeRequest(line: Buffer): WireRequest {
  const raw = parse(line);
  const request: WireRequest = {
    id: integer(raw.id, 'id', Number.MAX_SAFE_INTEGER),
    client: end(raw.client, 'client'),
    proxy: end(raw.proxy, 'proxy'),
    paths: list(raw.paths, 'paths', text),
    globs: raw.globs === undefined ? [] : list(raw.globs, 'globs', text),
  };
  return raw.socket === undefined ? request : { ...request, socket: socketRef(raw.socket, 'socket') };
}

function distrusted(value: unknown, what: string): Distrusted {
  const raw = object(value, what);
  return { path: text(raw.path, `${what}.path`), failure: failureOf(raw.failure, `${what}.failure`) };
}

function failureOf(value: unknown, what: string): IdentityFailure {
  if (!IDENTITY_FAILURES.includes(value as IdentityFailure)) throw invalid(`${what}: not a known failure`);
  return value as IdentityFailure;
}

function processIdentity(value: unknown, what: string): ProcessIdentity {
  const identity = object(value, what);
  const pair = (v: unknown, where: string): [string, string] => {
    const both = list(v, where, text);
    if (both.length !== 2) throw invalid(`${where}: expected [path, resolved]`);
    return [both[0] as string, both[1] as string];
  };
  return {
    pid: integer(identity.pid, `${what}.pid`, 2 ** 31),
    exe: text(identity.exe, `${what}.exe`),
    ancestors: list(identity.ancestors, `${what}.ancestors`, text),
    cmdlinePaths: list(identity.cmdlinePaths, `${what}.cmdlinePaths`, text),
    resolved: list(identity.resolved, `${what}.resolved`, pair),
    verified: list(identity.verified, `${what}.verified`, text),
    distrusted: list(identity.distrusted, `${what}.distrusted`, distrusted),
  };
}

export function decodeAnswer(line: Buffer): WireAnswer {
  const raw = parse(line);
  const id = integer(raw.id, 'id', Number.MAX_SAFE_INTEGER);
  const result = object(raw.result, 'result');
  if (result.ok === false) {
    const failure = failureOf(result.failure, 'result.failure');
    const detail = typeof result.detail === 'string' ? result.detail.slice(0, MAX_IDENTITY_PATH_BYTES) : '';
    return { id, result: { ok: false, failure, detail } };
  }
  if (result.ok !== true) throw invalid('result.ok: expected a boolean');
  return {
    id,
    result: {
      ok: true,
      identity: processIdentity(result.identity, 'result.identity'),
      holders: list(result.holders, 'result.holders', processIdentity),
      socket: socketRef(result.socket, 'result.socket'),
    },
  };
}

/**
 * Splits a byte stream into lines of at most MAX_IDENTITY_MESSAGE_BYTES, handing each to `onLine`; a longer
 * line calls `onOverflow` once and the splitter takes nothing more (the peer is then disconnected).
 */
export function lineSplitter(onLine: (line: Buffer) => void, onOverflow: () => void): (chunk: Buffer) => void {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let broken = false;
  return function push(chunk) {
    if (broken) return;
    let rest = chunk;
    for (let newline = rest.indexOf(NEWLINE); newline !== -1; newline = rest.indexOf(NEWLINE)) {
      const line = Buffer.concat([...pending, rest.subarray(0, newline)]);
      pending = [];
      pendingBytes = 0;
      rest = rest.subarray(newline + 1);
      if (line.byteLength >= MAX_IDENTITY_MESSAGE_BYTES) {
        broken = true;
        onOverflow();
        return;
      }
      if (line.byteLength > 0) onLine(line);
    }
    pendingBytes += rest.byteLength;
    if (pendingBytes >= MAX_IDENTITY_MESSAGE_BYTES) {
      broken = true;
      onOverflow();
      return;
    }
    if (rest.byteLength > 0) pending.push(rest);
  };
}
