// The network middlewares boundary implements itself, by every name a policy may use for them, and the checks of
// their `config` at load (docs/policy.md#built-in-regex, #secret-scanner, #reverse-canary). Pure: what a built-in does
// to traffic is middleware/'s job.

import { userPatternsProblem } from './secret-patterns.js';

/** Closed set of built-ins. */
export const BUILTIN_MIDDLEWARES = ['regex', 'secret-scan', 'reverse-canary'] as const;
export type BuiltinMiddleware = (typeof BUILTIN_MIDDLEWARES)[number];

/** Prefixes no operator registration may use: OpenShell's, Ryno's and boundary's own built-in namespaces. */
export const RESERVED_MIDDLEWARE_PREFIXES = ['openshell/', 'ryno/', 'boundary/'] as const;

/** Both spellings of the regex name the same built-in: files from either world load unchanged. */
const BUILTIN_NAMES: ReadonlyMap<string, BuiltinMiddleware> = new Map([
  ['openshell/regex', 'regex'],
  ['ryno/regex', 'regex'],
  ['boundary/secret-scan', 'secret-scan'],
  ['boundary/reverse-canary', 'reverse-canary'],
]);

/** The only `mode` the regex built-in has: every match is replaced. */
const REGEX_MODES = ['redact'] as const;
/** What the secret scanner does with a match; the first is the default. */
export const SECRET_SCAN_MODES = ['block', 'redact'] as const;
export type SecretScanMode = (typeof SECRET_SCAN_MODES)[number];

export function builtinNamed(name: string): BuiltinMiddleware | undefined {
  return BUILTIN_NAMES.get(name);
}

export function isReservedMiddlewareName(name: string): boolean {
  return RESERVED_MIDDLEWARE_PREFIXES.some((prefix) => name.startsWith(prefix));
}

function extraKey(config: Readonly<Record<string, unknown>>, allowed: readonly string[]): string | undefined {
  return Object.keys(config).find((key) => !allowed.includes(key));
}

function modeProblem(what: string, mode: unknown, modes: readonly string[]): string | undefined {
  if (mode === undefined || (modes as readonly unknown[]).includes(mode)) return undefined;
  return `the ${what} built-in's mode must be ${modes.join(' or ')}, got ${JSON.stringify(mode)}`;
}

/** What is wrong with `config` for `builtin`, or undefined when it is accepted. `config` is plain data. */
export function builtinConfigProblem(builtin: BuiltinMiddleware, config: Readonly<Record<string, unknown>>): string | undefined {
  switch (builtin) {
    case 'regex': {
      // Closed: a pattern list or a block mode would be silently ignored by OpenShell's own regex, so neither loads.
      const extra = extraKey(config, ['mode']);
      if (extra !== undefined) return `the regex built-in takes only mode, not ${extra}`;
      return modeProblem('regex', config.mode, REGEX_MODES);
    }
    case 'secret-scan': {
      const extra = extraKey(config, ['mode', 'patterns']);
      if (extra !== undefined) return `the secret-scan built-in takes only mode and patterns, not ${extra}`;
      return modeProblem('secret-scan', config.mode, SECRET_SCAN_MODES) ?? userPatternsProblem(config.patterns);
    }
    case 'reverse-canary': {
      // It watches every value the credential set holds; nothing about that is the policy's to tune.
      const extra = extraKey(config, []);
      return extra === undefined ? undefined : `the reverse-canary built-in takes no config, not ${extra}`;
    }
  }
}
