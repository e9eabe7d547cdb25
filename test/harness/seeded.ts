// One seeded pseudo-random generator for every randomised test: the same corpus on every run, so a failure
// names a seed and an index that reproduce it.

export type Random = () => number;

/** mulberry32: a small deterministic generator of numbers in [0, 1). */
export function seeded(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
