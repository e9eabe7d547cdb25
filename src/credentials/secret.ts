// The Secret wrapper: the only holder of a credential value. Every rendering path (String, JSON, inspect,
// template literals, pino) shows `[redacted]`; `reveal()` is the one way out, called only at the rewrite point.

import { inspect } from 'node:util';

export const REDACTED = '[redacted]';

export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The real value. Call only where it is written into an upstream request (rewrite-head/body). */
  reveal(): string {
    return this.#value;
  }

  /** Compares without revealing to the caller (used to tell whether a reload changed anything). */
  equals(other: Secret): boolean {
    return this.#value === other.#value;
  }

  get length(): number {
    return this.#value.length;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [Symbol.toPrimitive](): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}

