// The network middlewares boundary implements itself, by every name a policy may use for them, and the checks of
// their `config` at load (docs/policy.md#built-in-regex). Pure: what a built-in does to traffic is middleware/'s job.

/** Closed set of built-ins. */
export const BUILTIN_MIDDLEWARES = ['regex'] as const;
export type BuiltinMiddleware = (typeof BUILTIN_MIDDLEWARES)[number];

/** Prefixes no operator registration may use: OpenShell's, Ryno's and boundary's own built-in namespaces. */
export const RESERVED_MIDDLEWARE_PREFIXES = ['openshell/', 'ryno/', 'boundary/'] as const;

/** Both spellings name the same built-in: files from either world load unchanged. */
const BUILTIN_NAMES: ReadonlyMap<string, BuiltinMiddleware> = new Map([
  ['openshell/regex', 'regex'],
  ['ryno/regex', 'regex'],
]);

/** The only `mode` the regex built-in has: every match is replaced. */
const REGEX_MODES = ['redact'] as const;

export function builtinNamed(name: string): BuiltinMiddleware | undefined {
  return BUILTIN_NAMES.get(name);
}

export function isReservedMiddlewareName(name: string): boolean {
  return RESERVED_MIDDLEWARE_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/** What is wrong with `config` for `builtin`, or undefined when it is accepted. `config` is plain data. */
export function builtinConfigProblem(builtin: BuiltinMiddleware, config: Readonly<Record<string, unknown>>): string | undefined {
  switch (builtin) {
    case 'regex': {
      // Closed: a pattern list or a block mode would be silently ignored by OpenShell's own regex, so neither loads.
      const extra = Object.keys(config).find((key) => key !== 'mode');
      if (extra !== undefined) return `the regex built-in takes only mode, not ${extra}`;
      const mode = config.mode;
      if (mode !== undefined && !(REGEX_MODES as readonly unknown[]).includes(mode)) {
        return `the regex built-in's mode must be ${REGEX_MODES.join(' or ')}, got ${JSON.stringify(mode)}`;
      }
      return undefined;
    }
  }
}
