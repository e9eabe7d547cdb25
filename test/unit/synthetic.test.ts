import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { advanceEpoch, EPOCH_FILE_NAME } from '../../src/dns/epoch.js';
import { cidrContains, parseCidr, parseIp } from '../../src/net/ip.js';
import { contractDigest, createSyntheticPool, type MappingRequest, type PoolEvent } from '../../src/net/synthetic.js';
import { CONTRACT_SHARE_DIVISOR, mappingLimits } from '../../src/net/synthetic-budget.js';
import { testClock } from '../harness/clock.js';
import { stubEndpoint } from '../harness/dns-policy.js';

function request(name: string, overrides: Partial<MappingRequest> = {}): MappingRequest {
  return {
    name,
    family: 4,
    contract: 'c1',
    endpointIds: ['test#0'],
    addresses: ['93.184.216.34'],
    routes: [{ port: 443, endpointIds: ['test#0'], addresses: ['93.184.216.34'] }],
    ttlSeconds: 30,
    policyGeneration: 1,
    ...overrides,
  };
}

function allocate(pool: ReturnType<typeof createSyntheticPool>, name: string, overrides: Partial<MappingRequest> = {}) {
  const result = pool.allocate(request(name, overrides));
  assert.ok(result.ok, `allocation of ${name} failed`);
  return result;
}

describe('synthetic pool windows', () => {
  it('uses the /19 window of 198.18.0.0/15 selected by epoch mod 16', () => {
    const clock = testClock();
    assert.equal(createSyntheticPool({ epoch: 0, now: clock.now }).windows[4], '198.18.0.0/19');
    assert.equal(createSyntheticPool({ epoch: 1, now: clock.now }).windows[4], '198.18.32.0/19');
    assert.equal(createSyntheticPool({ epoch: 15, now: clock.now }).windows[4], '198.19.224.0/19');
    assert.equal(createSyntheticPool({ epoch: 16, now: clock.now }).windows[4], '198.18.0.0/19');
    assert.equal(createSyntheticPool({ epoch: 0, now: clock.now }).stats().capacity[4], 8_192);
    assert.equal(createSyntheticPool({ epoch: 3, now: clock.now }).windows[6], 'fd23:6f70:656e::6000/115');
  });

  it('hands out addresses only inside the current window, and contains() rejects other epochs', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 7, now: clock.now });
    const { mapping } = allocate(pool, 'api.example.test');
    const window = parseCidr(pool.windows[4])!;
    assert.ok(cidrContains(window, parseIp(mapping.syntheticIp)!));
    assert.equal(pool.contains(mapping.syntheticIp), true);
    assert.equal(pool.contains('198.18.0.1'), false, 'epoch 0 window is not captured in epoch 7');
    assert.equal(pool.contains('10.0.0.1'), false);
  });

  it('accepts a custom range inside 127.0.0.0/8 and refuses a malformed or too narrow one', () => {
    const clock = testClock();
    assert.equal(createSyntheticPool({ epoch: 1, now: clock.now, cidr: '127.18.0.0/15' }).windows[4], '127.18.32.0/19');
    assert.equal(createSyntheticPool({ epoch: 1, now: clock.now, cidr: '127.18.0.0/24' }).windows[4], '127.18.0.16/28');
    assert.throws(() => createSyntheticPool({ epoch: 0, now: clock.now, cidr: '198.18.0.1/15' }), { code: 'ADDRESS_INVALID' });
    assert.throws(() => createSyntheticPool({ epoch: 0, now: clock.now, cidr: '198.18.0.0/25' }), { code: 'ADDRESS_INVALID' });
    assert.throws(() => createSyntheticPool({ epoch: 0, now: clock.now, cidr: 'fd00::/8' }), { code: 'ADDRESS_INVALID' });
    assert.throws(() => createSyntheticPool({ epoch: -1, now: clock.now }), { code: 'DNS_EPOCH_INVALID' });
  });
});

describe('synthetic mappings', () => {
  it('clamps the upstream TTL to [1 s, 30 s] (DN-03)', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    assert.equal(allocate(pool, 'a.test', { ttlSeconds: 0 }).mapping.ttlSeconds, 1);
    assert.equal(allocate(pool, 'b.test', { ttlSeconds: 86_400 }).mapping.ttlSeconds, 30);
    assert.equal(allocate(pool, 'c.test', { ttlSeconds: 12.7 }).mapping.ttlSeconds, 12);
    assert.equal(allocate(pool, 'd.test', { ttlSeconds: Number.NaN }).mapping.ttlSeconds, 1);
  });

  it('keeps the same address for the same key, with a new mapping id and generation (DN-23)', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const first = allocate(pool, 'api.example.test');
    clock.advance(10_000);
    const second = allocate(pool, 'api.example.test', { addresses: ['93.184.216.35'] });
    assert.equal(second.mapping.syntheticIp, first.mapping.syntheticIp);
    assert.notEqual(second.mapping.id, first.mapping.id);
    assert.match(second.mapping.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(first.mapping.mappingGeneration, 1);
    assert.equal(second.mapping.mappingGeneration, 2);
    assert.equal(second.refreshed, true);
    assert.deepEqual(second.mapping.addresses, ['93.184.216.35']);
  });

  it('gives a changed endpoint contract a new address (DN-24)', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const before = allocate(pool, 'api.example.test', { contract: 'c1' });
    const after = allocate(pool, 'api.example.test', { contract: 'c2' });
    assert.notEqual(after.mapping.syntheticIp, before.mapping.syntheticIp);
  });

  it('gives two names that share one real address two synthetic addresses (DN-22)', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const a = allocate(pool, 'a.example.test');
    const b = allocate(pool, 'b.example.test');
    assert.notEqual(a.mapping.syntheticIp, b.mapping.syntheticIp);
  });

  it('reports an expired address as expired, never missing, and never gives it to another name (DN-25)', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const { mapping } = allocate(pool, 'api.example.test', { ttlSeconds: 5 });
    assert.equal(pool.lookup(mapping.syntheticIp).state, 'live');
    clock.advance(5_000);
    assert.equal(pool.lookup(mapping.syntheticIp).state, 'expired', 'expired at the boundary, even before a sweep');
    assert.deepEqual(pool.sweep().map((m) => m.id), [mapping.id]);
    assert.deepEqual(pool.sweep(), []);
    const lookup = pool.lookup(mapping.syntheticIp);
    assert.equal(lookup.state, 'expired');
    assert.equal(lookup.state === 'expired' && lookup.mapping.name, 'api.example.test');
    // Each name its own contract: one contract's share of the burst is a quarter of it (synthetic-budget.ts).
    for (let i = 0; i < 100; i++) assert.notEqual(allocate(pool, `n${i}.test`, { contract: `c${i}` }).mapping.syntheticIp, mapping.syntheticIp);
    assert.equal(pool.lookup('198.19.255.255').state, 'missing');
    assert.equal(pool.lookup('not an ip').state, 'missing');
  });

  it('gives an expired key its own address back when it is resolved again', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const first = allocate(pool, 'api.example.test', { ttlSeconds: 1 });
    clock.advance(2_000);
    pool.sweep();
    const again = allocate(pool, 'api.example.test');
    assert.equal(again.mapping.syntheticIp, first.mapping.syntheticIp);
    assert.equal(pool.lookupKey('api.example.test', 4, 'c1').state, 'live');
    assert.equal(pool.stats().reserved[4], 1);
  });

  it('never lets an older policy generation replace a newer live record (DN-26)', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const newer = allocate(pool, 'api.example.test', { policyGeneration: 5 });
    const older = pool.allocate(request('api.example.test', { policyGeneration: 4 }));
    assert.equal(older.ok, false);
    assert.equal(!older.ok && older.failure, 'stale-generation');
    const live = pool.lookup(newer.mapping.syntheticIp);
    assert.equal(live.state === 'live' && live.mapping.id, newer.mapping.id);
    clock.advance(31_000);
    assert.equal(pool.allocate(request('api.example.test', { policyGeneration: 4 })).ok, true, 'once the newer record expired');
  });

  it('refuses new names beyond the burst, counting only new ones, and still refreshes known keys (DN-27)', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const limits = mappingLimits(pool.stats().capacity[4]);
    for (let i = 0; i < limits.burst; i++) allocate(pool, `n${i}.test`, { contract: `c${i % CONTRACT_SHARE_DIVISOR}` });
    const over = pool.allocate(request('late.test', { contract: 'c-late' }));
    assert.equal(!over.ok && over.failure, 'rate-limited');
    assert.equal(pool.allocate(request('n1.test', { contract: 'c1' })).ok, true, 'known keys still refresh');
    clock.advance(1_000);
    assert.equal(pool.allocate(request('late.test', { contract: 'c-late' })).ok, true, 'the bucket refills');
    assert.deepEqual(pool.stats().reserved, { 4: limits.burst + 1, 6: 0 });
  });

  it('allocates IPv6 keys from their own window', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const { mapping } = allocate(pool, 'api.example.test', { family: 6 });
    assert.equal(mapping.syntheticIp, 'fd23:6f70:656e::');
    assert.equal(allocate(pool, 'b.test', { family: 6 }).mapping.syntheticIp, 'fd23:6f70:656e::1');
    assert.equal(pool.contains('fd23:6f70:656e::1fff'), true);
    assert.equal(pool.contains('fd23:6f70:656e::2000'), false);
  });

  it('tells subscribers about publications and expiries', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const events: PoolEvent[] = [];
    const unsubscribe = pool.subscribe((e) => events.push(e));
    pool.subscribe(() => {
      throw new Error('a broken listener');
    });
    allocate(pool, 'api.example.test', { ttlSeconds: 1 });
    clock.advance(1_000);
    pool.sweep();
    unsubscribe();
    allocate(pool, 'b.test');
    assert.deepEqual(events.map((e) => `${e.kind} ${e.mapping.name}`), ['published api.example.test', 'expired api.example.test']);
  });

  it('derives the contract digest from the endpoints, not their order', () => {
    const a = stubEndpoint({ host: 'api.example.test', ports: [443] }, 0);
    const b = stubEndpoint({ host: '*.example.test', ports: [443] }, 1);
    const a2 = stubEndpoint({ host: 'api.example.test', ports: [443, 8443] }, 0);
    assert.equal(contractDigest([a, b]), contractDigest([b, a]));
    assert.notEqual(contractDigest([a, b]), contractDigest([a2, b]));
  });
});

describe('synthetic epoch persistence', () => {
  it('starts at 0 and advances by one on every start', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'boundary-epoch-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    assert.equal(await advanceEpoch({ stateDir: dir }), 0);
    assert.equal(await advanceEpoch({ stateDir: dir }), 1);
    assert.equal(await advanceEpoch({ stateDir: join(dir, 'nested') }), 0);
  });

  it('fails closed on a corrupt or unreadable epoch file (DN-29)', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'boundary-epoch-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    for (const text of ['', 'seven\n', '-1\n', '1.5', '007', '99999999999999999999']) {
      await writeFile(join(dir, EPOCH_FILE_NAME), text);
      await assert.rejects(advanceEpoch({ stateDir: dir }), { code: 'DNS_EPOCH_INVALID' }, JSON.stringify(text));
    }
    const other = join(dir, 'other');
    await mkdir(join(other, EPOCH_FILE_NAME), { recursive: true });
    await assert.rejects(advanceEpoch({ stateDir: other }), { code: 'DNS_EPOCH_INVALID' });
  });
});
