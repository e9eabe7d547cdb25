// `boundary env`: prints the workload's environment, each credential key set to its canonical placeholder.
// Reads only the key names of the credentials file: never resolves value_from, never prints a value.

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { isBoundaryError } from '../../shared/errors.js';
import { type CredentialsDocument, parseCredentials } from '../../credentials/parse.js';
import { shapedPlaceholder } from '../../credentials/shaped.js';
import { canonicalPlaceholder, DEFAULT_PLACEHOLDER_FAMILY, PLACEHOLDER_FAMILIES, type PlaceholderFamily } from '../../credentials/placeholder.js';
import type { CliIo, Command } from './io.js';

const ENV_FORMATS = ['shell', 'json'] as const;
type EnvFormat = (typeof ENV_FORMATS)[number];

const HELP = `Usage: boundary env --credentials FILE [--format shell|json] [--placeholder-family openshell|ryno]

Prints the environment to give the workload: every key of every provider in FILE, set to its
placeholder openshell:resolve:env:KEY (sorted, each key once), or the placeholder shaped like the real
token for a key with a format. Values are never read or printed.

Options:
  --credentials FILE          the credentials YAML (as for boundary run --credentials)
  --format FORMAT             shell (KEY=value lines, the default) or json (one object)
  --placeholder-family NAME   openshell (the default) or ryno (ryno:resolve:env:KEY); give boundary run the same
  -h, --help                  show this help
`;

interface EnvArgs {
  readonly file: string;
  readonly format: EnvFormat;
  readonly family: PlaceholderFamily;
}

function parseArgs(argv: readonly string[]): EnvArgs | 'help' | string {
  let file: string | undefined;
  let format: string = 'shell';
  let family: string = DEFAULT_PLACEHOLDER_FAMILY;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] ?? '';
    if (arg === '-h' || arg === '--help') return 'help';
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    if (flag !== '--credentials' && flag !== '--format' && flag !== '--placeholder-family') return `unknown argument '${arg}'`;
    const value = inline ?? argv[++i];
    if (value === undefined || value === '') return `${flag} needs a value`;
    if (flag === '--credentials') file = value;
    else if (flag === '--format') format = value;
    else family = value;
  }
  if (file === undefined) return '--credentials FILE is required';
  if (!(ENV_FORMATS as readonly string[]).includes(format)) return `--format must be one of ${ENV_FORMATS.join(', ')}`;
  if (!(PLACEHOLDER_FAMILIES as readonly string[]).includes(family)) return `--placeholder-family must be one of ${PLACEHOLDER_FAMILIES.join(', ')}`;
  return { file, format: format as EnvFormat, family: family as PlaceholderFamily };
}

/**
 * The placeholder environment of a credentials document: key -> canonical placeholder of `family`, sorted; a key
 * with a format gets its shaped placeholder instead (`shaped`, docs/credentials.md#shaped-placeholders).
 */
export function placeholderEnvironment(
  keys: Iterable<string>,
  family: PlaceholderFamily = DEFAULT_PLACEHOLDER_FAMILY,
  shaped: ReadonlyMap<string, string> = new Map(),
): [string, string][] {
  return [...new Set(keys)].sort().map((key) => [key, shaped.get(key) ?? canonicalPlaceholder(key, family)]);
}

/** Key -> shaped placeholder, from the first provider that gives the key a format (boundary run derives the same). */
function shapedOf(doc: CredentialsDocument): Map<string, string> {
  const shaped = new Map<string, string>();
  for (const provider of doc.providers) {
    for (const entry of provider.env) {
      if (entry.format !== undefined && !shaped.has(entry.key)) shaped.set(entry.key, shapedPlaceholder(provider.name, entry.key, entry.format));
    }
  }
  return shaped;
}

function reportError(err: unknown, io: CliIo): number {
  if (!isBoundaryError(err)) throw err;
  io.stderr.write(`boundary env: ${err.message} (${err.code})\n`);
  for (const issue of err.issues) {
    const where = issue.line === undefined ? '' : `:${issue.line}:${issue.column ?? 1}`;
    io.stderr.write(`  ${issue.source ?? ''}${where} ${issue.path}: ${issue.message} (${issue.code})\n`);
  }
  return 1;
}

export const envCommand: Command = async function envCommand(argv, io) {
  const args = parseArgs(argv);
  if (args === 'help') {
    io.stdout.write(HELP);
    return 0;
  }
  if (typeof args === 'string') {
    io.stderr.write(`boundary env: ${args} (USAGE)\n\n${HELP}`);
    return 2;
  }
  const path = resolve(io.cwd, args.file);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    io.stderr.write(`boundary env: cannot read ${path}: ${(err as Error).message} (CREDENTIALS_UNREADABLE)\n`);
    return 1;
  }
  try {
    const doc = parseCredentials(text, { source: path });
    const env = placeholderEnvironment(doc.providers.flatMap((provider) => [...provider.env.map((entry) => entry.key), ...provider.grants.map((grant) => grant.key)]), args.family, shapedOf(doc));
    if (args.format === 'json') io.stdout.write(`${JSON.stringify(Object.fromEntries(env), null, 2)}\n`);
    else io.stdout.write(env.map(([key, value]) => `${key}=${value}\n`).join(''));
    return 0;
  } catch (err) {
    return reportError(err, io);
  }
};
