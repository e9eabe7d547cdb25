// Items that must show activity within a limit, least recently active first, and the one timer that finds those quiet
// for that long: per item, a timer to arm and clear would cost as much as the rest of its bookkeeping. Activity only
// moves an item to the back; the timer, when it fires, hands over the items at the front that have been quiet for the
// limit and waits for the next one. The upstream response-head deadline (h2-call.ts) and the stalled-answer limit
// (stall-watch.ts) run on it.

import type { Timers } from '../shared/timers.js';

export interface Watched {
  /** When the item was last active, on the watch's clock. */
  quietSince: number;
}

export class QuietWatch<T extends Watched> {
  private readonly items = new Set<T>();
  private timer: unknown = undefined;
  /** Within fire(): what the walk leaves is armed for once, at its end. */
  private firing = false;
  private readonly timers: Timers;
  private readonly limitMs: number;
  private readonly quiet: (item: T) => boolean;

  /**
   * `quiet(item)`: the item has been quiet for `limitMs`. It is no longer watched, unless this returns false (it moved
   * after all): it is then watched again from now.
   */
  constructor(timers: Timers, limitMs: number, quiet: (item: T) => boolean) {
    this.timers = timers;
    this.limitMs = limitMs;
    this.quiet = quiet;
  }

  has(item: T): boolean {
    return this.items.has(item);
  }

  /** Watches the item, quiet from now (again, if it was watched already). */
  add(item: T): void {
    item.quietSince = this.timers.now();
    this.items.delete(item);
    this.items.add(item);
    if (this.timer === undefined && !this.firing) this.arm(this.limitMs);
  }

  /** Activity: a watched item's clock starts again. */
  touch(item: T): void {
    if (!this.items.delete(item)) return;
    item.quietSince = this.timers.now();
    this.items.add(item);
  }

  delete(item: T): void {
    if (this.items.delete(item) && this.items.size === 0) this.disarm();
  }

  /** Nothing is watched any more. */
  clear(): void {
    this.items.clear();
    this.disarm();
  }

  private disarm(): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(ms: number): void {
    this.timer = this.timers.setTimeout(() => this.fire(), ms);
  }

  private fire(): void {
    this.timer = undefined;
    this.firing = true;
    const now = this.timers.now();
    // An item watched again goes to the back with its new time, so the walk stops at it if not before.
    for (const item of this.items) {
      if (now - item.quietSince < this.limitMs) break;
      this.items.delete(item);
      if (!this.quiet(item)) {
        item.quietSince = now;
        this.items.add(item);
      }
    }
    this.firing = false;
    const first = this.items.values().next();
    if (!first.done && this.timer === undefined) this.arm(this.limitMs - (now - first.value.quietSince));
  }
}
