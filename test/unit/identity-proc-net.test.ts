// /proc/net/tcp{,6} as the kernel prints it (docs/identity.md#how-a-connection-maps-to-a-process; reference case
// B18): IPv4, IPv6 and IPv4-mapped addresses decoded and encoded on either byte order, and only an ESTABLISHED
// socket whose whole (local, remote) pair matches gives its inode.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeEnd, encodeEnd, findSockets, pairKeys, type TcpSocket } from '../../src/identity/proc-net.js';

const HEADER = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n';
const HEADER6 = '  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n';

function line(sl: number, local: string, remote: string, state: string, uid: number, inode: number): string {
  return `  ${sl}: ${local} ${remote} ${state} 00000000:00000000 00:00000000 00000000  ${uid}        0 ${inode} 1 0000000000000000 20 4 30 10 -1\n`;
}

describe('socket table addresses', () => {
  const cases: [string, string, { ip: string; port: number }][] = [
    ['IPv4 loopback, little-endian words', '0100007F:1F90', { ip: '127.0.0.1', port: 8080 }],
    ['IPv4 private', '0A00A8C0:D431', { ip: '192.168.0.10', port: 54321 }],
    ['IPv6 loopback', '00000000000000000000000001000000:0CEA', { ip: '::1', port: 3306 }],
    ['IPv4-mapped IPv6 comes back as IPv4', '0000000000000000FFFF00000100007F:0050', { ip: '127.0.0.1', port: 80 }],
    ['IPv6 documentation address', 'B80D0120000000000000000001000000:01BB', { ip: '2001:db8::1', port: 443 }],
  ];
  for (const [label, text, expected] of cases) {
    it(`decodes ${label}`, () => {
      assert.deepEqual(decodeEnd(text, true), expected);
    });
  }

  it('encodes an IPv4 end in both tables (tcp, and tcp6 as ::ffff:a.b.c.d) and back', () => {
    const forms = encodeEnd({ ip: '127.0.0.1', port: 8080 }, true);
    assert.deepEqual(forms, { v4: '0100007F:1F90', v6: '0000000000000000FFFF00000100007F:1F90' });
    assert.deepEqual(decodeEnd(forms.v6 ?? '', true), { ip: '127.0.0.1', port: 8080 });
  });

  it('treats a mapped end as the IPv4 end it carries, and an IPv6 end as tcp6 only', () => {
    assert.deepEqual(encodeEnd({ ip: '::ffff:127.0.0.1', port: 8080 }, true), encodeEnd({ ip: '127.0.0.1', port: 8080 }, true));
    assert.deepEqual(encodeEnd({ ip: '2001:db8::1', port: 443 }, true), { v6: 'B80D0120000000000000000001000000:01BB' });
  });

  it('prints each word in host order: big-endian hosts see the bytes as they are', () => {
    assert.deepEqual(encodeEnd({ ip: '127.0.0.1', port: 8080 }, false).v4, '7F000001:1F90');
    assert.deepEqual(decodeEnd('7F000001:1F90', false), { ip: '127.0.0.1', port: 8080 });
  });

  it('refuses malformed text and addresses', () => {
    for (const bad of ['0100007F', '0100007:1F90', 'ZZ00007F:1F90', '0100007F:FFFFF']) assert.equal(decodeEnd(bad, true), undefined, bad);
    assert.deepEqual(encodeEnd({ ip: 'localhost', port: 80 }, true), {});
    assert.deepEqual(pairKeys({ ip: 'x', port: 1 }, { ip: '127.0.0.1', port: 2 }, true), []);
  });
});

describe('finding a socket by its (local, remote) pair', () => {
  const client = { ip: '127.0.0.1', port: 40_000 };
  const proxy = { ip: '127.0.0.1', port: 3128 };
  const [v4key, v6key] = pairKeys(client, proxy, true);
  const CLIENT = '0100007F:9C40';
  const PROXY = '0100007F:0C38';
  const table =
    HEADER +
    line(0, PROXY, '00000000:0000', '0A', 0, 100) + // the proxy's listener
    line(1, PROXY, CLIENT, '01', 10001, 101) + // the proxy's accepted end: the pair reversed
    line(2, CLIENT, '0100007F:0C39', '01', 1000, 102) + // same client port, another remote port
    line(3, '0200007F:9C40', PROXY, '01', 1000, 103) + // another local address
    line(4, CLIENT, PROXY, '06', 1000, 104) + // TIME_WAIT
    line(5, CLIENT, PROXY, '01', 1000, 0) + // no inode
    'garbage line\n' +
    line(6, CLIENT, PROXY, '01', 1000, 105);

  it('returns only the ESTABLISHED socket whose whole pair matches, with its uid', () => {
    const found = new Map<string, TcpSocket>();
    findSockets(table, new Set([v4key as string]), found);
    assert.deepEqual(found.get(v4key as string), { inode: 105, uid: 1000 });
    assert.equal(found.size, 1);
  });

  it('finds nothing for a pair that is not in the table, and skips the header', () => {
    const found = new Map<string, TcpSocket>();
    findSockets(table, new Set(pairKeys({ ip: '127.0.0.1', port: 1 }, proxy, true)), found);
    findSockets(`${HEADER}`, new Set([v4key as string]), found);
    assert.equal(found.size, 0);
  });

  it('finds a dual-stack client in tcp6 through its mapped form', () => {
    const mapped = (hex: string) => `0000000000000000FFFF0000${hex}`;
    const table6 = HEADER6 + line(0, mapped(CLIENT), mapped(PROXY), '01', 1000, 200);
    const found = new Map<string, TcpSocket>();
    findSockets(table6, new Set([v6key as string]), found);
    assert.deepEqual(found.get(v6key as string), { inode: 200, uid: 1000 });
  });
});
