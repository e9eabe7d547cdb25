// The policy file follower of a standalone boundary: policy/policy-file.ts with the first load parsed in place
// (nothing is served yet) and every reload of a large policy compiled off the event loop (policy/parse-off-thread.ts),
// so the old generation keeps answering requests and /readyz until the new one is ready; a small one is parsed
// in place (OFF_THREAD_MIN_BYTES). Each parse knows the registered middleware services, and a policy is applied only
// once they accepted its entries' configs. Closing stops the worker.

import { createPolicyCompiler } from '../policy/parse-off-thread.js';
import { createPolicyFileWatcher, type PolicyFileWatcher } from '../policy/policy-file.js';
import type { PolicyTexts } from '../policy/texts.js';
import type { MiddlewareRegistry } from '../middleware/registry.js';

export type { PolicyFileWatcher };

type FollowOptions = Omit<Parameters<typeof createPolicyFileWatcher>[0], 'parse' | 'reloadParse'> & {
  /** Keeps the text of every policy parsed, for explain's suggestions. */
  readonly texts: PolicyTexts;
  /** The registered middleware services: their names for the parser, and each validates its entries' configs. */
  readonly middleware: Pick<MiddlewareRegistry, 'names' | 'admit'>;
};

export function followPolicyFile(options: FollowOptions): PolicyFileWatcher {
  const { texts, middleware, ...rest } = options;
  const compiler = createPolicyCompiler();
  const watcher = createPolicyFileWatcher({
    ...rest,
    async parse(text, parseOptions) {
      const policy = texts.parse(text, { ...parseOptions, middlewareServices: middleware.names() });
      await middleware.admit(policy);
      return policy;
    },
    async reloadParse(text, parseOptions) {
      const policy = await compiler.parse(text, { ...parseOptions, middlewareServices: middleware.names() });
      // A policy whose services refuse (or cannot check) an entry's config is not applied: the one in force stays.
      await middleware.admit(policy);
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
