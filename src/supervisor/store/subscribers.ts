// The subscriber list both stores hand changes to: subscribe() with its unsubscribe, and delivery that isolates a
// listener that throws (logged, never passed to the writer or to the other listeners). Knows nothing of storage.

import type { Logger } from '../../telemetry/logger.js';
import type { StoreChange } from './store.js';

export interface Subscribers {
  subscribe(listener: (change: StoreChange) => void): () => void;
  notify(change: StoreChange): void;
}

export function createSubscribers(logger: Logger | undefined): Subscribers {
  const listeners = new Set<(change: StoreChange) => void>();
  return {
    subscribe(listener) {
      listeners.add(listener);
      return function unsubscribe() {
        listeners.delete(listener);
      };
    },
    notify(change) {
      // A copy: a listener that unsubscribes (or subscribes another) mid-delivery does not change this round.
      for (const listener of [...listeners]) {
        try {
          listener(change);
        } catch (err) {
          logger?.error({ err }, 'supervisor store subscriber threw');
        }
      }
    },
  };
}
