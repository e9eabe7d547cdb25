// The identity socket's messages (docs/identity.md#the-identity-socket): a request and an answer each decode back
// to what was encoded, with the fields a re-check and verification added (the socket, globs, every holder, what was
// verified and what was distrusted), and a message with one field wrong fails IDENTITY_MESSAGE_INVALID.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ProcessIdentity } from '../../src/identity/source.js';
import { decodeAnswer, decodeRequest, encodeLine, type WireAnswer, type WireRequest } from '../../src/identity/wire.js';

const REQUEST: WireRequest = {
  id: 7,
  client: { ip: '127.0.0.1', port: 40_000 },
  proxy: { ip: '127.0.0.1', port: 3128 },
  paths: ['/usr/bin/python3'],
  globs: ['/opt/agent/*'],
  socket: { inode: 123_456, uid: 65_534 },
};

const CURL: ProcessIdentity = {
  pid: 41,
  exe: '/usr/bin/curl',
  ancestors: ['/usr/bin/bash'],
  cmdlinePaths: [],
  resolved: [['/usr/bin/python3', '/usr/bin/python3.11']],
  verified: ['/usr/bin/curl'],
  distrusted: [{ path: '/usr/bin/bash', failure: 'executable-changed' }],
};

const ANSWER: WireAnswer = {
  id: 7,
  result: { ok: true, identity: CURL, holders: [{ ...CURL, pid: 42, exe: '/usr/bin/python3.11', verified: [], distrusted: [] }], socket: { inode: 123_456, uid: 65_534 } },
};

/** The line with one field of the message replaced. */
function altered(message: object, change: (raw: Record<string, unknown>) => void): Buffer {
  const raw = JSON.parse(JSON.stringify(message)) as Record<string, unknown>;
  change(raw);
  return Buffer.from(JSON.stringify(raw));
}

const line = (message: WireRequest | WireAnswer): Buffer => encodeLine(message).subarray(0, -1);

describe('identity socket messages', () => {
  it('decode back to what was encoded', () => {
    assert.deepEqual(decodeRequest(line(REQUEST)), REQUEST);
    assert.deepEqual(decodeAnswer(line(ANSWER)), ANSWER);
    const { socket: _, globs: __, ...first } = REQUEST;
    assert.deepEqual(decodeRequest(line(first)), { ...first, globs: [] }, 'a first lookup names no socket');
  });

  it('refuse a request or an answer with one field wrong', () => {
    const requests: ((raw: Record<string, unknown>) => void)[] = [
      (raw) => (raw.socket = { inode: -1, uid: 0 }),
      (raw) => (raw.socket = { inode: 1 }),
      (raw) => (raw.globs = ['']),
      (raw) => (raw.globs = 'x'),
    ];
    for (const change of requests) assert.throws(() => decodeRequest(altered(REQUEST, change)), { code: 'IDENTITY_MESSAGE_INVALID' });
    const answers: ((result: Record<string, unknown>) => void)[] = [
      (result) => delete result.holders,
      (result) => delete result.socket,
      (result) => ((result.identity as Record<string, unknown>).verified = [1]),
      (result) => ((result.identity as Record<string, unknown>).distrusted = [{ path: '/x', failure: 'no-such-failure' }]),
      (result) => ((result.holders as Record<string, unknown>[])[0] = { pid: 1 }),
    ];
    for (const change of answers) {
      assert.throws(() => decodeAnswer(altered(ANSWER, (raw) => change(raw.result as Record<string, unknown>))), { code: 'IDENTITY_MESSAGE_INVALID' });
    }
  });
});
