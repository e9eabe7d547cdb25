// The forward proxy's upstream pools (proxy/upstream.ts): one per destination and pinned addresses, the least
// recently used closed past the bound, the pool asked for last found again without a lookup.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createUpstreams, MAX_UPSTREAM_POOLS } from '../../src/proxy/upstream.js';

const dest = (host: string, addresses: readonly string[], port = 80) => ({ host, port, addresses, tls: false });

describe('upstream pools', () => {
  it('gives the same pool for the same destination and addresses, another for other addresses or another port', async (t) => {
    const upstreams = createUpstreams({ connectTimeoutMs: 1_000 });
    t.after(() => upstreams.close());
    const a = upstreams.pool(dest('a.test', ['127.0.0.2']));
    assert.equal(upstreams.pool(dest('a.test', ['127.0.0.2'])), a);
    const moved = upstreams.pool(dest('a.test', ['127.0.0.3']));
    assert.notEqual(moved, a);
    assert.notEqual(upstreams.pool(dest('a.test', ['127.0.0.2'], 8080)), a);
    assert.notEqual(upstreams.pool(dest('a.test', ['127.0.0.2', '127.0.0.3'])), a);
    assert.notEqual(upstreams.pool(dest('b.test', ['127.0.0.2'])), a);
    assert.equal(upstreams.pool(dest('a.test', ['127.0.0.2'])), a);
    assert.equal(upstreams.pool(dest('a.test', ['127.0.0.3'])), moved);
  });

  it('closes the least recently used pool past the bound, counting a repeated ask as a use', async (t) => {
    const upstreams = createUpstreams({ connectTimeoutMs: 1_000 });
    t.after(() => upstreams.close());
    const a = upstreams.pool(dest('a.test', ['127.0.0.2']));
    const b = upstreams.pool(dest('b.test', ['127.0.0.2']));
    assert.equal(upstreams.pool(dest('a.test', ['127.0.0.2'])), a);
    assert.equal(upstreams.pool(dest('a.test', ['127.0.0.2'])), a);
    for (let i = 0; i < MAX_UPSTREAM_POOLS - 1; i++) upstreams.pool(dest(`h${i}.test`, ['127.0.0.2']));
    assert.equal(b.closed, true);
    assert.equal(a.closed, false);
    assert.equal(upstreams.pool(dest('a.test', ['127.0.0.2'])), a);
    const again = upstreams.pool(dest('b.test', ['127.0.0.2']));
    assert.notEqual(again, b);
    assert.equal(again.closed, false);
  });

  it('never hands out a closed pool, even the one asked for last', async (t) => {
    const upstreams = createUpstreams({ connectTimeoutMs: 1_000 });
    t.after(() => upstreams.close());
    const a = upstreams.pool(dest('a.test', ['127.0.0.2']));
    await a.close();
    const next = upstreams.pool(dest('a.test', ['127.0.0.2']));
    assert.notEqual(next, a);
    assert.equal(next.closed, false);
  });
});
