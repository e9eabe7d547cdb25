// The fields by name boundary gives the chain must read a raw list as node:http's IncomingMessage.headers does:
// stages read content-type, host and cookie from it. For HTTP/1.1 (http1/server-request.ts headersByName), node:http's
// own server reads each list here; the lists repeat names (kept once, joined, or listed) and use names of
// Object.prototype's members, which a plain object already answers to. HTTP/2's (proxy/h2-request.ts) joins repeats.

import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { headersByName } from '../../src/http1/server-request.js';
import { fieldsByName } from '../../src/proxy/h2-request.js';

const NAMES = ['Host', 'Cookie', 'Set-Cookie', 'Content-Type', 'X-A', 'Constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf', 'Authorization', 'Accept'];
const LISTS = 200;
const FIELDS_PER_LIST = 8;

function randomList(seed: number): string[] {
  let x = seed >>> 0;
  const next = (n: number): number => {
    x = (Math.imul(x, 1_103_515_245) + 12_345) >>> 0;
    return (x >>> 16) % n;
  };
  const list = ['Host', 'h'];
  for (let i = 0; i < FIELDS_PER_LIST; i++) {
    const name = NAMES[next(NAMES.length)] as string;
    list.push(next(2) === 0 ? name : name.toLowerCase(), `v${i}`);
  }
  return list;
}

describe('headersByName', () => {
  it("equals node:http's headers for the same raw list", async () => {
    const seen: IncomingMessage[] = [];
    const server = createServer({ joinDuplicateHeaders: false }, (req, res) => {
      seen.push(req);
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      for (let n = 0; n < LISTS; n++) {
        const list = randomList(n + 1);
        let head = 'GET / HTTP/1.1\r\n';
        for (let i = 0; i < list.length; i += 2) head += `${list[i]}: ${list[i + 1]}\r\n`;
        await new Promise<void>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1', () => socket.end(`${head}Connection: close\r\n\r\n`));
          socket.resume();
          socket.on('error', reject);
          socket.on('close', () => resolve());
        });
      }
    } finally {
      server.close();
    }
    assert.equal(seen.length, LISTS);
    assert.ok(
      seen.some((req) => req.rawHeaders.filter((h) => h.toLowerCase() === 'constructor').length > 1),
      'some list repeats a prototype member name',
    );
    for (const req of seen) assert.deepEqual(Object.entries(headersByName(req.rawHeaders)), Object.entries(req.headers), req.rawHeaders.join('|'));
  });

  it('HTTP/2 fields by name: a prototype member name starts fresh too', () => {
    assert.deepEqual(Object.entries(fieldsByName(['constructor', 'a', 'x-a', '1', 'constructor', 'b', 'x-a', '2'])), [
      ['constructor', 'a, b'],
      ['x-a', '1, 2'],
    ]);
  });
});
