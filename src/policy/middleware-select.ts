// The compiled `network_middlewares` entries of a policy and which of them a destination host selects: by host only,
// whichever entry allowed the request (docs/policy.md#network-middlewares). Pure.

import { canonicalJson } from './canonical.js';
import type { MiddlewareDraft } from './middleware-section.js';
import type { MiddlewareEntry } from './types.js';

const NONE: readonly MiddlewareEntry[] = Object.freeze([]);

/** The drafts as frozen entries in ascending order, and the host selection over them. */
export function compileMiddlewares(drafts: readonly MiddlewareDraft[]): {
  readonly middlewares: readonly MiddlewareEntry[];
  readonly middlewaresFor: (host: string) => readonly MiddlewareEntry[];
} {
  if (drafts.length === 0) return { middlewares: NONE, middlewaresFor: () => NONE };
  const middlewares = Object.freeze([...drafts].sort((a, b) => a.order - b.order).map(entryOf));
  return {
    middlewares,
    middlewaresFor(host) {
      let selected: MiddlewareEntry[] | undefined;
      for (const entry of middlewares) {
        if (!entry.selects(host)) continue;
        selected ??= [];
        selected.push(entry);
      }
      return selected ?? NONE;
    },
  };
}

function entryOf(draft: MiddlewareDraft): MiddlewareEntry {
  const { include, exclude } = draft;
  return Object.freeze({
    key: draft.key,
    name: draft.name,
    middleware: draft.middleware,
    builtin: draft.builtin,
    order: draft.order,
    config: deepFrozen(draft.config),
    onError: draft.onError,
    onUninspectable: draft.onUninspectable ?? (draft.onError === 'fail_closed' ? 'deny' : 'allow'),
    include: Object.freeze(include.map((m) => m.pattern ?? '')),
    exclude: Object.freeze(exclude.map((m) => m.pattern ?? '')),
    selects: (host: string): boolean => include.some((m) => m.matches(host)) && !exclude.some((m) => m.matches(host)),
    fingerprint: canonicalJson(draft.canonical),
  });
}

function deepFrozen<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFrozen(child);
    Object.freeze(value);
  }
  return value;
}
