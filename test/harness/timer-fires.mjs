// Preloaded into a process under test (NODE_OPTIONS=--import): appends the time of every timer callback the process
// runs to $TIMER_FIRES_FILE, one line each, so that a test can count what wakes an idle process.
import { appendFileSync } from 'node:fs';

const file = process.env.TIMER_FIRES_FILE;
if (file !== undefined && file !== '') {
  for (const name of ['setTimeout', 'setInterval']) {
    const original = globalThis[name];
    globalThis[name] = function (callback, ...rest) {
      if (typeof callback !== 'function') return original.call(this, callback, ...rest);
      return original.call(
        this,
        function (...args) {
          appendFileSync(file, `${Date.now()}\n`);
          return callback.apply(this, args);
        },
        ...rest,
      );
    };
  }
}
