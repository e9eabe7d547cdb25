// Preloaded into a process under test (NODE_OPTIONS=--import): keeps the time of every timer callback the process
// runs, and on SIGUSR2 writes them to $TIMER_FIRES_FILE, one a line, so that a test can count what wakes an idle
// process. In memory until asked: a write per callback would be work the count then includes.
import { renameSync, writeFileSync } from 'node:fs';

const file = process.env.TIMER_FIRES_FILE;
if (file !== undefined && file !== '') {
  const times = [];
  for (const name of ['setTimeout', 'setInterval']) {
    const original = globalThis[name];
    globalThis[name] = function (callback, ...rest) {
      if (typeof callback !== 'function') return original.call(this, callback, ...rest);
      return original.call(
        this,
        function (...args) {
          times.push(Date.now());
          return callback.apply(this, args);
        },
        ...rest,
      );
    };
  }
  // Written aside, then renamed: a reader polling for the file never sees it half written.
  process.on('SIGUSR2', () => {
    writeFileSync(`${file}.part`, times.join('\n'));
    renameSync(`${file}.part`, file);
  });
}
