// The policy file follower of a standalone boundary: policy/policy-file.ts with the first load parsed in place
// (nothing is served yet) and every reload of a large policy compiled off the event loop (policy/parse-off-thread.ts),
// so the old generation keeps answering requests and /readyz until the new one is ready; a small one is parsed
// in place (OFF_THREAD_MIN_BYTES). Closing stops the worker.

import { createPolicyCompiler } from '../policy/parse-off-thread.js';
import { createPolicyFileWatcher, type PolicyFileWatcher } from '../policy/policy-file.js';
import type { PolicyTexts } from '../policy/texts.js';

export type { PolicyFileWatcher };

type FollowOptions = Omit<Parameters<typeof createPolicyFileWatcher>[0], 'parse' | 'reloadParse'> & {
  /** Keeps the text of every policy parsed, for explain's suggestions. */
  readonly texts: PolicyTexts;
};

export function followPolicyFile(options: FollowOptions): PolicyFileWatcher {
  const { texts, ...rest } = options;
  const compiler = createPolicyCompiler();
  const watcher = createPolicyFileWatcher({
    ...rest,
    parse: texts.parse,
    async reloadParse(text, parseOptions) {
      const policy = await compiler.parse(text, parseOptions);
      texts.remember(policy, text);
      return policy;
    },
  });
  return {
    loadInitial: () => watcher.loadInitial(),
    reload: () => watcher.reload(),
    start: () => watcher.start(),
    close() {
      watcher.close();
      void compiler.close();
    },
  };
}
