// The middleware implementations the chain runs, by policy entry: the built-ins (an external service is refused at
// load, policy/middleware-section.ts), and the shared capacity every stage takes a turn from.

import { type CredentialSource, createStaticCredentialSource } from '../credentials/source.js';
import type { MiddlewareEntry } from '../policy/types.js';
import { createMiddlewareCapacity, type MiddlewareCapacity } from './capacity.js';
import type { MiddlewareImplementation } from './implementation.js';
import { REGEX_MIDDLEWARE } from './regex.js';
import { createReverseCanary } from './reverse-canary.js';
import { createSecretScan } from './secret-scan.js';

export interface MiddlewareRegistry {
  /** What `entry` runs. */
  implementationFor(entry: MiddlewareEntry): MiddlewareImplementation;
  /** Every selected stage waits here for a turn to hold a body. */
  readonly capacity: MiddlewareCapacity;
}

export function createMiddlewareRegistry(
  options: { readonly capacity?: MiddlewareCapacity; readonly credentials?: CredentialSource | undefined } = {},
): MiddlewareRegistry {
  // A scanner's regexes are compiled once per entry of a policy (entries are replaced, never changed, on reload).
  const scanners = new WeakMap<MiddlewareEntry, MiddlewareImplementation>();
  // Without a credential source there is no value to watch: the canary then lets everything pass.
  const canary = createReverseCanary(options.credentials ?? createStaticCredentialSource({ providers: [] }));
  return {
    implementationFor(entry) {
      switch (entry.builtin) {
        case 'regex':
          return REGEX_MIDDLEWARE;
        case 'secret-scan': {
          const known = scanners.get(entry);
          if (known !== undefined) return known;
          const made = createSecretScan(entry);
          scanners.set(entry, made);
          return made;
        }
        case 'reverse-canary':
          return canary;
      }
    },
    capacity: options.capacity ?? createMiddlewareCapacity(),
  };
}
