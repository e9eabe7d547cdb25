// The CredentialSource interface every source implements (file, control channel), the holder they share
// (current set, revision bumps, listeners), and the static source the control channel feeds. No I/O.

import { type CredentialSet, createCredentialSet, type ProviderInput } from './set.js';

export type CredentialListener = (next: CredentialSet, previous: CredentialSet) => void;

export interface CredentialSource {
  /** The current revision. Cheap: called once per request when its scope is built and again before the write. */
  current(): CredentialSet;
  /** Called after a new revision becomes current; returns the unsubscribe function. */
  subscribe(listener: CredentialListener): () => void;
  /** Stops watching; current() keeps answering with the last set. Idempotent. */
  close(): Promise<void>;
}

export interface StaticCredentialSource extends CredentialSource {
  /**
   * Validates `providers` and makes them current as the next revision; a push that changes nothing keeps the
   * revision (so in-flight scopes stay valid). Throws CREDENTIALS_INVALID and keeps the last good set.
   */
  replace(providers: readonly ProviderInput[]): CredentialSet;
}

interface SetHolder {
  current(): CredentialSet;
  subscribe(listener: CredentialListener): () => void;
  /** Builds the next revision from `providers`; returns undefined when nothing changed. Throws when invalid. */
  offer(providers: readonly ProviderInput[]): CredentialSet | undefined;
}

/** Shared by the sources: revision numbering and listeners in one place. */
export function createSetHolder(initial: CredentialSet): SetHolder {
  let current = initial;
  const listeners = new Set<CredentialListener>();
  return {
    current: () => current,
    subscribe(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    offer(providers) {
      const next = createCredentialSet({ providers, revision: current.revision + 1, previous: current });
      if (next.sameAs(current)) return undefined;
      const previous = current;
      current = next;
      for (const listener of [...listeners]) listener(next, previous);
      return next;
    },
  };
}

/** A source whose revisions are pushed in by the caller (attached mode: the control channel). */
export function createStaticCredentialSource(input: {
  readonly providers: readonly ProviderInput[];
  readonly revision?: number;
}): StaticCredentialSource {
  const holder = createSetHolder(createCredentialSet({ providers: input.providers, revision: input.revision ?? 1 }));
  return {
    current: holder.current,
    subscribe: holder.subscribe,
    replace(providers) {
      return holder.offer(providers) ?? holder.current();
    },
    async close() {},
  };
}
