import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_HOSTS_ENTRIES, parseHostsFile } from '../../src/net/hosts.js';

describe('parseHostsFile', () => {
  it('maps names to addresses per family, in file order, ignoring comments, case and a trailing dot', () => {
    const table = parseHostsFile(
      ['# comment', '127.0.0.1 localhost', '10.0.0.5  Api.Example.Test. api # trailing', '10.0.0.6\tapi.example.test', '', 'fd00:0::1 api.example.test', '10.0.0.5 api.example.test'].join('\n'),
    );
    assert.deepEqual(table.lookup('api.example.test', 4), ['10.0.0.5', '10.0.0.6']);
    assert.deepEqual(table.lookup('api.example.test', 6), ['fd00::1']);
    assert.deepEqual(table.lookup('api', 4), ['10.0.0.5']);
    assert.deepEqual(table.lookup('missing.test', 4), []);
    assert.deepEqual(table.issues, []);
  });

  it('skips bad lines and reports each with its line number', () => {
    const table = parseHostsFile('not-an-ip a.test\n10.0.0.1\nfe80::1%eth0 b.test\n10.0.0.2 bad!name ok.test\n0x7f.1 c.test\r\n');
    assert.deepEqual(table.lookup('ok.test', 4), ['10.0.0.2']);
    assert.deepEqual(table.issues.map((i) => [i.code, i.line]), [
      ['ADDRESS_INVALID', 1],
      ['ADDRESS_INVALID', 2],
      ['ADDRESS_INVALID', 3],
      ['ADDRESS_INVALID', 4],
      ['ADDRESS_INVALID', 5],
    ]);
  });

  it(`stops at ${MAX_HOSTS_ENTRIES} entries and says so`, () => {
    const lines = Array.from({ length: MAX_HOSTS_ENTRIES + 5 }, (_, i) => `10.0.${i >> 8 & 0xff}.${i & 0xff} n${i}.test`);
    const table = parseHostsFile(lines.join('\n'));
    assert.equal(table.size, MAX_HOSTS_ENTRIES);
    assert.equal(table.issues.length, 1);
    assert.deepEqual(table.lookup(`n${MAX_HOSTS_ENTRIES}.test`, 4), []);
  });
});
