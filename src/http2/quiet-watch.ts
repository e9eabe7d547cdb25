// Items that must show activity within a limit, least recently active first, and the one timer that finds those quiet
// for that long: per item, a timer to arm and clear would cost as much as the rest of its bookkeeping. Activity only
// moves an item to the back; the timer, when it fires, hands over the items at the front that have been quiet for the
// limit and waits for the next one. The upstream response-head deadline (h2-call.ts) and the stalled-answer limit
// (stall-watch.ts) run on it.

import type { Timers } from '../shared/timers.js';

export interface Watched {
  /** When the item was last active, on the watch's clock. */
  quietSince: number;
  /**
   * The watch's list runs through its items: a Set's replaced hash tables would keep finished items through the
   * scavenges once the Set has reached the old generation, as a Map's do (stream-table.ts). Set while watched, cleared
   * as the item leaves; so an item is in one watch at most (a Call in its client's head watch, a request stream in
   * its session's stall watch).
   */
  quietPrev: Watched | undefined;
  quietNext: Watched | undefined;
  quietWatched: boolean;
}

export class QuietWatch<T extends Watched> {
  /** Least recently active first. */
  private first: T | undefined = undefined;
  private last: T | undefined = undefined;
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
    return item.quietWatched;
  }

  /** Watches the item, quiet from now (again, if it was watched already). */
  add(item: T): void {
    item.quietSince = this.timers.now();
    this.unlink(item);
    this.append(item);
    if (this.timer === undefined && !this.firing) this.arm(this.limitMs);
  }

  /** Activity: a watched item's clock starts again. */
  touch(item: T): void {
    if (!this.unlink(item)) return;
    item.quietSince = this.timers.now();
    this.append(item);
  }

  delete(item: T): void {
    if (this.unlink(item) && this.first === undefined) this.disarm();
  }

  /** Nothing is watched any more. */
  clear(): void {
    while (this.first !== undefined) this.unlink(this.first);
    this.disarm();
  }

  private append(item: T): void {
    item.quietWatched = true;
    item.quietPrev = this.last;
    item.quietNext = undefined;
    if (this.last === undefined) this.first = item;
    else this.last.quietNext = item;
    this.last = item;
  }

  /** Takes the item out of the list, its links cleared so no finished item points at a later one; false: not in it. */
  private unlink(item: T): boolean {
    if (!item.quietWatched) return false;
    const prev = item.quietPrev as T | undefined;
    const next = item.quietNext as T | undefined;
    if (prev === undefined) this.first = next;
    else prev.quietNext = next;
    if (next === undefined) this.last = prev;
    else next.quietPrev = prev;
    item.quietPrev = undefined;
    item.quietNext = undefined;
    item.quietWatched = false;
    return true;
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
    for (let item = this.first; item !== undefined && now - item.quietSince >= this.limitMs; item = this.first) {
      this.unlink(item);
      if (!this.quiet(item)) {
        item.quietSince = now;
        this.append(item);
      }
    }
    this.firing = false;
    const first = this.first;
    if (first !== undefined && this.timer === undefined) this.arm(this.limitMs - (now - first.quietSince));
  }
}
