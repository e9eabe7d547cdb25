// An injected resolver: names map to fixed answers (loopback in tests), every call is counted,
// so a test can prove that a denied destination was never resolved.

import type { ResolveFailure, ResolveResult, Resolver } from '../../src/net/resolver.js';

export type FakeAnswer = readonly string[] | ResolveFailure | { readonly addresses: readonly string[]; readonly ttlSeconds: number };

export interface FakeResolver extends Resolver {
  readonly calls: { name: string; family: 4 | 6 }[];
  set(name: string, answer: FakeAnswer): void;
}

export function fakeResolver(entries: Readonly<Record<string, FakeAnswer>> = {}): FakeResolver {
  const table = new Map<string, FakeAnswer>(Object.entries(entries));
  const calls: { name: string; family: 4 | 6 }[] = [];
  return {
    calls,
    set(name, answer) {
      table.set(name, answer);
    },
    async resolve(name, family): Promise<ResolveResult> {
      calls.push({ name, family });
      const answer = table.get(name);
      if (answer === undefined) return { ok: false, failure: 'nxdomain', message: `${name}: no such name` };
      if (typeof answer === 'string') return { ok: false, failure: answer as ResolveFailure, message: `${name}: ${answer}` };
      const { addresses, ttlSeconds } = 'addresses' in answer ? answer : { addresses: answer as readonly string[], ttlSeconds: 30 };
      const wanted = addresses.filter((a) => (family === 4 ? !a.includes(':') : a.includes(':')));
      if (wanted.length === 0) return { ok: false, failure: 'nodata', message: `${name}: no ${family === 4 ? 'A' : 'AAAA'} records` };
      return { ok: true, addresses: wanted, ttlSeconds };
    },
  };
}
