// A connection's open streams by id: open addressing in two plain arrays, a slot emptied as its stream leaves.
// Not a Map: under stream churn a Map replaces its hash table every few deletions, V8 makes the replacement in the
// generation of the table it replaces, and the replaced table keeps its entries. Once a session's table has reached the
// old generation (an idle period is enough), every later table is made there too, and the streams written into them,
// the replaced tables' included, are kept through every scavenge until a full collection: most of what a stream
// allocates is promoted (docs/benchmarks.md#why-boundary-measured-late-costs-more-a-sidecar-that-has-idled). These
// arrays are replaced only when the table grows, and a slot let go holds nothing.

/** Slots at first; the table doubles when it is half full. */
const INITIAL_SLOTS = 16;

export class StreamTable<T> {
  private ids: number[];
  private items: (T | undefined)[];
  private mask: number;
  private count = 0;

  constructor() {
    this.ids = new Array<number>(INITIAL_SLOTS).fill(0);
    this.items = new Array<T | undefined>(INITIAL_SLOTS).fill(undefined);
    this.mask = INITIAL_SLOTS - 1;
  }

  get size(): number {
    return this.count;
  }

  get(id: number): T | undefined {
    const { ids, mask } = this;
    // Stream ids of one side share their parity and mostly come in order: id >>> 1 puts them in consecutive slots.
    for (let i = (id >>> 1) & mask; ; i = (i + 1) & mask) {
      const at = ids[i];
      if (at === id) return this.items[i];
      if (at === 0) return undefined;
    }
  }

  has(id: number): boolean {
    return this.get(id) !== undefined;
  }

  /** `id` is a stream id (1 to 2^31 - 1); `item` is never undefined. */
  set(id: number, item: T): void {
    if ((this.count + 1) * 2 > this.ids.length) this.grow();
    const { ids, mask } = this;
    for (let i = (id >>> 1) & mask; ; i = (i + 1) & mask) {
      const at = ids[i];
      if (at === id || at === 0) {
        if (at === 0) this.count++;
        ids[i] = id;
        this.items[i] = item;
        return;
      }
    }
  }

  delete(id: number): boolean {
    const { ids, items, mask } = this;
    let i = (id >>> 1) & mask;
    for (; ids[i] !== id; i = (i + 1) & mask) if (ids[i] === 0) return false;
    // Later entries of the same run move back into the gap, so a lookup never stops early and no slot is a tombstone.
    for (let j = (i + 1) & mask; ids[j] !== 0; j = (j + 1) & mask) {
      const home = ((ids[j] as number) >>> 1) & mask;
      if (((j - home) & mask) >= ((j - i) & mask)) {
        ids[i] = ids[j] as number;
        items[i] = items[j];
        i = j;
      }
    }
    ids[i] = 0;
    items[i] = undefined;
    this.count--;
    return true;
  }

  /** The streams open now, in no particular order: a copy, so the caller may close them as it goes. */
  values(): T[] {
    const out: T[] = [];
    for (const item of this.items) if (item !== undefined) out.push(item);
    return out;
  }

  clear(): void {
    this.ids.fill(0);
    this.items.fill(undefined);
    this.count = 0;
  }

  private grow(): void {
    const { ids, items } = this;
    const slots = ids.length * 2;
    this.ids = new Array<number>(slots).fill(0);
    this.items = new Array<T | undefined>(slots).fill(undefined);
    this.mask = slots - 1;
    this.count = 0;
    for (let i = 0; i < ids.length; i++) if (ids[i] !== 0) this.set(ids[i] as number, items[i] as T);
    // The old arrays may be old-generation garbage by now: emptied, they keep no stream through a scavenge.
    items.fill(undefined);
  }
}
