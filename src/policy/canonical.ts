// Canonical JSON (sorted keys, no whitespace) and the policy hash over it, plus deepFreeze for compiled
// policies. Pure. Equal canonical content gives an equal hash whatever the YAML spelling or comments.

import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every level; undefined members are dropped as JSON.stringify does. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Freezes plain objects and arrays recursively; functions, maps and class instances are left as they are. */
export function deepFreeze<T>(value: T): T {
  return createFreezer()(value);
}

/**
 * deepFreeze that remembers what it froze: a compiled policy reaches every endpoint twice (entries[].endpoints
 * and endpoints), and is frozen piece by piece while it compiles, so each object is walked once.
 */
export function createFreezer(): <T>(value: T) => T {
  const seen = new WeakSet<object>();
  const freeze = <T>(value: T): T => {
    if (value === null || typeof value !== 'object' || seen.has(value)) return value;
    if (!Array.isArray(value) && Object.getPrototypeOf(value) !== Object.prototype) return value;
    seen.add(value);
    Object.freeze(value);
    for (const child of Object.values(value)) freeze(child);
    return value;
  };
  return freeze;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  const keys = Object.keys(value);
  // Sorting allocates even when there is nothing to move; the readers write their objects in key order.
  if (!isSorted(keys)) keys.sort();
  for (const key of keys) out[key] = sortKeys((value as Record<string, unknown>)[key]);
  return out;
}

function isSorted(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if ((keys[i - 1] as string) > (keys[i] as string)) return false;
  return true;
}
