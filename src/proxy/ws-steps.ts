// The order of a WebSocket relay's client events while one waits for an external middleware service: each event is a
// step; a step that returns a promise holds back every later one (the client paused) until it settles, so nothing
// overtakes a message under evaluation. Pure but for the callbacks it is given.

export interface StepQueue {
  /** Runs `step` now, or after the steps before it when one is still waiting. */
  run(step: () => void | Promise<void>): void;
  /** A step is waiting: the client stays paused. */
  readonly busy: boolean;
}

export function createStepQueue(hooks: {
  /** A step began waiting: pause the client. */
  readonly hold: () => void;
  /** Every step ran: the client may read again. */
  readonly release: () => void;
  /** The relay is closing: what still waits is dropped. */
  readonly closed: () => boolean;
  /** A waiting step failed. */
  readonly failed: (err: unknown) => void;
}): StepQueue {
  const waiting: (() => void | Promise<void>)[] = [];
  let busy = false;

  function run(step: () => void | Promise<void>): void {
    if (busy) {
      waiting.push(step);
      return;
    }
    const pending = step();
    if (pending === undefined) return;
    busy = true;
    hooks.hold();
    pending.then(next, (err: unknown) => {
      busy = false;
      waiting.length = 0;
      hooks.failed(err);
    });
  }

  function next(): void {
    busy = false;
    while (!busy && waiting.length > 0) {
      if (hooks.closed()) {
        waiting.length = 0;
        return;
      }
      run(waiting.shift()!);
    }
    if (!busy && !hooks.closed()) hooks.release();
  }

  return {
    run,
    get busy() {
      return busy;
    },
  };
}
