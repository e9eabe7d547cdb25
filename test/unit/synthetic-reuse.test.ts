import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSyntheticPool, type MappingRequest, type SyntheticPool } from '../../src/net/synthetic.js';
import {
  CONTRACT_SHARE_DIVISOR,
  MAPPING_REFRESH_GRACE_MS,
  MAX_LIVE_MAPPINGS,
  MAX_MAPPING_TTL_SECONDS,
  MAX_NEW_MAPPINGS_PER_SECOND,
  mappingLimits,
  mostAddressesTaken,
  NEW_MAPPINGS_BURST,
  SYNTHETIC_QUARANTINE_MS,
} from '../../src/net/synthetic-budget.js';
import { parseCidr } from '../../src/net/ip.js';
import type { Mapping } from '../../src/net/synthetic.js';
import { createReservations } from '../../src/net/synthetic-reuse.js';
import { ipv4Window, ipv6Window } from '../../src/net/synthetic-window.js';
import { type TestClock, testClock } from '../harness/clock.js';
import { seeded } from '../harness/seeded.js';

/** The smallest window config allows (/24 split 16 ways): 16 addresses, so reuse comes quickly. */
const TINY_CIDR = '198.18.0.0/24';

function request(name: string, overrides: Partial<MappingRequest> = {}): MappingRequest {
  return {
    name,
    family: 4,
    contract: 'c1',
    endpointIds: ['test#0'],
    addresses: ['93.184.216.34'],
    routes: [{ port: 443, endpointIds: ['test#0'], addresses: ['93.184.216.34'] }],
    ttlSeconds: 1,
    policyGeneration: 1,
    ...overrides,
  };
}

/** What the test knows of each address: who had it, until when its answer was good, and its open connections. */
interface Owner {
  name: string;
  expiresAt: number;
  releasedAt: number;
  open: number;
}

/**
 * Checks every allocation against a model: an address changes hands only once its last answer expired, no
 * connection holds it, and the quarantine has passed since both.
 */
function watched(pool: SyntheticPool, clock: TestClock) {
  const owners = new Map<string, Owner>();
  let reuses = 0;
  return {
    owners,
    reuses: () => reuses,
    allocate(req: MappingRequest) {
      const result = pool.allocate(req);
      if (!result.ok) {
        assert.notEqual(result.failure, 'exhausted', `the window ran out at ${clock.now()}: ${result.message}`);
        return result;
      }
      const ip = result.mapping.syntheticIp;
      const before = owners.get(ip);
      if (before !== undefined && before.name !== req.name) {
        reuses++;
        assert.equal(before.open, 0, `${ip} went to ${req.name} while a connection to ${before.name} was open`);
        assert.ok(clock.now() >= before.expiresAt, `${ip} went to ${req.name} while the answer for ${before.name} was unexpired`);
        const since = Math.max(before.expiresAt, before.releasedAt);
        assert.ok(clock.now() - since >= SYNTHETIC_QUARANTINE_MS, `${ip} went to ${req.name} ${clock.now() - since} ms after ${before.name} let go`);
      }
      const same = before !== undefined && before.name === req.name;
      owners.set(ip, { name: req.name, expiresAt: result.mapping.expiresAt, releasedAt: same ? before.releasedAt : 0, open: same ? before.open : 0 });
      return result;
    },
    connect(ip: string): () => void {
      const release = pool.hold(ip);
      const owner = owners.get(ip);
      if (owner !== undefined) owner.open++;
      let done = false;
      return () => {
        release();
        if (done) return;
        done = true;
        if (owner !== undefined && owners.get(ip) === owner) {
          owner.open--;
          owner.releasedAt = clock.now();
        }
      };
    },
  };
}

describe('synthetic address reuse', () => {
  it('hands an expired address to another name only after the quarantine', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now, cidr: TINY_CIDR });
    const w = watched(pool, clock);
    const first = w.allocate(request('first.test', { contract: 'k0' }));
    assert.ok(first.ok);
    const seen = new Set<string>([first.mapping.syntheticIp]);
    // Walk the rest of the window, one name per contract and second (the tiny window's budget is small).
    for (let i = 1; seen.size < pool.stats().capacity[4]; i++) {
      clock.advance(10_000);
      pool.sweep();
      const r = w.allocate(request(`n${i}.test`, { contract: `k${i}` }));
      if (r.ok) seen.add(r.mapping.syntheticIp);
      assert.ok(i < 1_000, 'bounded');
    }
    const firstQuarantined = first.mapping.expiresAt + MAPPING_REFRESH_GRACE_MS;
    let next: ReturnType<typeof w.allocate> | undefined;
    for (let i = 0; next?.ok !== true; i++) {
      clock.advance(1_000);
      pool.sweep();
      next = w.allocate(request(`late${i}.test`, { contract: `late${i}` }));
      assert.ok(i < 1_000, 'bounded');
    }
    assert.equal(next.mapping.syntheticIp, first.mapping.syntheticIp, 'the oldest quarantined address is reused first');
    assert.ok(clock.now() - firstQuarantined >= SYNTHETIC_QUARANTINE_MS);
    assert.equal(w.reuses(), 1);
    const lookup = pool.lookup(first.mapping.syntheticIp);
    assert.equal(lookup.state === 'live' && lookup.mapping.name, next.mapping.name);
    assert.equal(pool.lookupKey('first.test', 4, 'k0').state, 'missing', 'the old key lost its address');
  });

  it('keeps an address while a connection holds it, and starts the quarantine at its release', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now, cidr: TINY_CIDR });
    const w = watched(pool, clock);
    const held = w.allocate(request('held.test', { contract: 'k0' }));
    assert.ok(held.ok);
    const release = w.connect(held.mapping.syntheticIp);
    const releaseAgain = pool.hold('not an address');
    releaseAgain();
    // Ten minutes of other names, then the connection closes; the address stays its own for the quarantine after.
    for (let i = 1; i <= 600; i++) {
      clock.advance(1_000);
      pool.sweep();
      const r = w.allocate(request(`n${i}.test`, { contract: `k${i}` }));
      if (r.ok) assert.notEqual(r.mapping.syntheticIp, held.mapping.syntheticIp);
    }
    assert.equal(pool.lookup(held.mapping.syntheticIp).state, 'expired', 'held: still the old mapping, admitting nothing');
    release();
    release();
    const releasedAt = clock.now();
    let taken = false;
    for (let i = 0; i < 600 && !taken; i++) {
      clock.advance(1_000);
      pool.sweep();
      const r = w.allocate(request(`after${i}.test`, { contract: `after${i}` }));
      taken = r.ok && r.mapping.syntheticIp === held.mapping.syntheticIp;
    }
    assert.ok(taken, 'the address is reused once the quarantine after the release passed');
    assert.ok(clock.now() - releasedAt >= SYNTHETIC_QUARANTINE_MS);
  });

  it('refreshes a mapping in use for free while a flood is refused, and gives other contracts their share', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    const api = pool.allocate(request('api.example.test', { contract: 'exact', ttlSeconds: 5 }));
    assert.ok(api.ok);
    let refused = 0;
    for (let step = 0; step < 600; step++) {
      clock.advance(100);
      pool.sweep();
      for (let i = 0; i < 50; i++) if (!pool.allocate(request(`f${step}-${i}.flood.test`, { contract: 'wildcard' })).ok) refused++;
      // The stub asks again as its cached answer runs out: a live (or just expired) mapping is refreshed, never refused.
      if (step % 40 === 39) {
        const again = pool.allocate(request('api.example.test', { contract: 'exact', ttlSeconds: 5 }));
        assert.equal(again.ok && again.mapping.syntheticIp, api.mapping.syntheticIp, `step ${step}`);
      }
    }
    assert.ok(refused > 25_000, `the flood was refused (${refused})`);
    const other = pool.allocate(request('new.other.test', { contract: 'other-wildcard' }));
    assert.equal(other.ok, true, 'a flood under one contract leaves the others their share');
  });

  it('refuses more live mappings than the limit, whatever the contracts', () => {
    const clock = testClock();
    const pool = createSyntheticPool({ epoch: 0, now: clock.now });
    let made = 0;
    let last: ReturnType<SyntheticPool['allocate']> | undefined;
    for (let i = 0; i < 5_000 && made <= MAX_LIVE_MAPPINGS; i++) {
      clock.advance(20);
      last = pool.allocate(request(`n${i}.test`, { contract: `k${i % 16}`, ttlSeconds: MAX_MAPPING_TTL_SECONDS }));
      if (last.ok) made++;
      else if (last.failure === 'live-limit') break;
    }
    assert.equal(made, MAX_LIVE_MAPPINGS);
    assert.equal(!last?.ok && last?.failure, 'live-limit');
  });

  for (const [label, cidr] of [
    ['the default window', undefined],
    ['a /16 range (the test harness)', '127.77.0.0/16'],
    ['the smallest window', TINY_CIDR],
  ] as const) {
    it(`never runs out under a seeded flood with connections, in ${label}`, () => {
      const clock = testClock();
      const pool = createSyntheticPool({ epoch: 0, now: clock.now, ...(cidr === undefined ? {} : { cidr }) });
      const w = watched(pool, clock);
      const random = seeded(16);
      const open: { at: number; release: () => void }[] = [];
      let highWater = 0;
      let n = 0;
      // Ten simulated minutes: far past the quarantine, at more attempts per second than the limit lets through.
      for (let step = 0; step < 6_000; step++) {
        clock.advance(Math.floor(random() * 200));
        if (step % 10 === 0) pool.sweep();
        for (let i = 0; i < 40; i++) {
          const r = w.allocate(request(`n${n++}.test`, { contract: `k${Math.floor(random() * 8)}`, ttlSeconds: 1 + Math.floor(random() * 40) }));
          if (r.ok && r.highWater) highWater++;
          if (r.ok && random() < 0.05) open.push({ at: clock.now() + random() * 120_000, release: w.connect(r.mapping.syntheticIp) });
        }
        for (let i = open.length - 1; i >= 0; i--) {
          if (open[i]!.at <= clock.now()) open.splice(i, 1)[0]!.release();
        }
        const stats = pool.stats();
        assert.ok(stats.reserved[4] <= stats.capacity[4]);
      }
      assert.ok(w.reuses() > 0 || cidr === undefined, `addresses were reused (${w.reuses()})`);
      assert.ok(highWater <= 1);
    });
  }
});

describe('synthetic reservations without the budget in the way', () => {
  // Limits far above what the window holds, so only the quarantine stands between a freed address and its next name.
  const LOOSE = { live: 1_000, perSecond: 1_000, burst: 1_000 };
  const windows = { 4: ipv4Window(parseCidr(TINY_CIDR)!, 0), 6: ipv6Window(parseCidr('fd00::/48')!, 0) };
  const expiring = (at: number) => ({ expiresAt: at }) as Mapping;

  it('says exhausted until the oldest quarantine is over, then hands that address on', () => {
    const clock = testClock();
    const r = createReservations(windows, LOOSE, clock.now);
    const ips: string[] = [];
    for (let i = 0; i < windows[4].capacity; i++) {
      const claim = r.claim(`k${i}`, 4, 'c');
      assert.ok(claim.ok);
      claim.record.last = expiring(clock.now() + 1_000);
      ips.push(claim.record.ip);
    }
    assert.equal(new Set(ips).size, 16);
    assert.equal(r.claim('late', 4, 'c').ok, false);
    const held = r.hold(ips[1]!);
    clock.advance(1_000 + MAPPING_REFRESH_GRACE_MS);
    r.sweep();
    assert.equal(r.stats().quarantined, 15, 'the held address stays out of quarantine');
    clock.advance(SYNTHETIC_QUARANTINE_MS - 1);
    const early = r.claim('late', 4, 'c');
    assert.equal(!early.ok && early.failure, 'exhausted', 'one millisecond before the quarantine ends');
    clock.advance(1);
    const late = r.claim('late', 4, 'c');
    assert.equal(late.ok && late.record.ip, ips[0]);
    assert.equal(r.byKey('k0'), undefined);
    held();
    r.sweep();
    // The held address entered quarantine only at its sweep after the release: the last to be handed on.
    for (let i = 2; i < 16; i++) assert.equal(r.claim(`again${i}`, 4, 'c').ok, true);
    assert.equal(r.claim('the held one', 4, 'c').ok, false);
    clock.advance(SYNTHETIC_QUARANTINE_MS);
    const last = r.claim('the held one', 4, 'c');
    assert.equal(last.ok && last.record.ip, ips[1]);
  });

  it('brings a quarantined key back on its own address, and a connection to it out of quarantine', () => {
    const clock = testClock();
    const r = createReservations(windows, LOOSE, clock.now);
    const a = r.claim('a', 4, 'c');
    assert.ok(a.ok);
    a.record.last = expiring(clock.now() + 1_000);
    clock.advance(1_000 + MAPPING_REFRESH_GRACE_MS);
    r.sweep();
    assert.equal(r.stats().quarantined, 1);
    const release = r.hold(a.record.ip);
    assert.equal(r.stats().quarantined, 0);
    release();
    assert.equal(r.stats().quarantined, 1, 'back in quarantine at the release, from the start');
    const again = r.claim('a', 4, 'c');
    assert.equal(again.ok && again.refreshed && again.record.ip, a.record.ip);
    assert.equal(r.stats().quarantined, 0);
  });
});

describe('synthetic budget arithmetic', () => {
  it('fits the live limit, the burst and a quarantine of new mappings into every window config allows', () => {
    assert.equal(SYNTHETIC_QUARANTINE_MS, 60_000);
    const defaults = mappingLimits(8_192);
    assert.deepEqual(defaults, { live: MAX_LIVE_MAPPINGS, perSecond: MAX_NEW_MAPPINGS_PER_SECOND, burst: NEW_MAPPINGS_BURST });
    assert.equal(mostAddressesTaken(defaults), 1_024 + 400 + 6_000);
    for (let prefix = 8; prefix <= 24; prefix++) {
      const capacity = 2 ** (32 - prefix) / 16;
      assert.ok(mostAddressesTaken(mappingLimits(capacity)) <= capacity, `/${prefix}`);
      assert.doesNotThrow(() => createSyntheticPool({ epoch: 0, now: () => 0, cidr: `10.0.0.0/${prefix}` }));
    }
    assert.ok(CONTRACT_SHARE_DIVISOR > 1);
  });
});
