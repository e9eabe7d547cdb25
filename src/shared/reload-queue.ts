// One re-read at a time for file followers: a change reported while a read runs collapses into one more pass,
// so the last write always wins and a burst of events costs at most two reads. Knows nothing about files.

/** Wraps `readOnce` (true when it applied something new); callers during a run share its promise. */
export function coalesceReloads(readOnce: () => Promise<boolean>): () => Promise<boolean> {
  let running: Promise<boolean> | undefined;
  let again = false;
  return function reload(): Promise<boolean> {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      let changed = false;
      do {
        again = false;
        changed = (await readOnce()) || changed;
      } while (again);
      return changed;
    })().finally(() => {
      running = undefined;
    });
    return running;
  };
}
