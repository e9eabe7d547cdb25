// The middleware implementations the chain runs, by policy entry: the built-ins (an external service is refused at
// load, policy/middleware-section.ts), and the shared capacity every stage takes a turn from.

import type { MiddlewareEntry } from '../policy/types.js';
import { createMiddlewareCapacity, type MiddlewareCapacity } from './capacity.js';
import type { MiddlewareImplementation } from './implementation.js';
import { REGEX_MIDDLEWARE } from './regex.js';

export interface MiddlewareRegistry {
  /** What `entry` runs. */
  implementationFor(entry: MiddlewareEntry): MiddlewareImplementation;
  /** Every selected stage waits here for a turn to hold a body. */
  readonly capacity: MiddlewareCapacity;
}

export function createMiddlewareRegistry(options: { readonly capacity?: MiddlewareCapacity } = {}): MiddlewareRegistry {
  return {
    implementationFor(entry) {
      switch (entry.builtin) {
        case 'regex':
          return REGEX_MIDDLEWARE;
      }
    },
    capacity: options.capacity ?? createMiddlewareCapacity(),
  };
}
