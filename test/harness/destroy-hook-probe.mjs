// Loaded into a child with `--expose-internals --import`: on SIGUSR2 the child writes to stderr whether an async
// `destroy` hook is enabled in it (every AsyncResource made while one is leaves a weak handle for the garbage
// collector and for Node's own teardown to free), numbered from 1 so that a reader knows which asking it answers.
import { createRequire } from 'node:module';

const { destroyHooksExist } = createRequire(import.meta.url)('internal/async_hooks');
let asked = 0;
process.on('SIGUSR2', () => {
  asked++;
  process.stderr.write(`destroy-hooks ${asked} ${destroyHooksExist()}\n`);
});
