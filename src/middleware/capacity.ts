// The shared bound on middleware work: requests (and responses) whose bodies are held for middleware at once, and
// those waiting for a turn. Past both, a request is refused before its body is read (503 middleware_failed), so
// held bodies never grow without bound.

/** Bodies held for middleware at once, across every stage and request. */
export const MAX_MIDDLEWARE_ACTIVE = 32;
/** Requests waiting for one of those turns. */
export const MAX_MIDDLEWARE_QUEUED = 64;

export interface MiddlewareCapacity {
  /** A turn: `true` now, a promise of one when queued, or `false` when the queue is full too. */
  acquire(): true | false | Promise<true>;
  /** Gives a turn back; the first queued request gets it. */
  release(): void;
  /** Turns held, for tests and metrics. */
  active(): number;
}

export function createMiddlewareCapacity(limits: { readonly active: number; readonly queued: number } = { active: MAX_MIDDLEWARE_ACTIVE, queued: MAX_MIDDLEWARE_QUEUED }): MiddlewareCapacity {
  let active = 0;
  const waiting: (() => void)[] = [];
  return {
    acquire() {
      if (active < limits.active) {
        active++;
        return true;
      }
      if (waiting.length >= limits.queued) return false;
      return new Promise<true>((resolve) => waiting.push(() => resolve(true)));
    },
    release() {
      const next = waiting.shift();
      // The turn passes straight to the next request: `active` stays as it is.
      if (next !== undefined) next();
      else active = Math.max(0, active - 1);
    },
    active: () => active,
  };
}
