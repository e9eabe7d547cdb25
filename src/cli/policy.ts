// `boundary policy check|explain`: validate policy files, and say which entry allows or denies one request
// and why. Parses its own arguments; loading and deciding belong to policy/, suggestions to policy/suggest.ts.

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { type ErrorCode, isBoundaryError, type Issue } from '../errors.js';
import { formatAuthority, parseAuthority } from '../net/host.js';
import { canonicalTarget } from '../proxy/path.js';
import { decide } from '../policy/decide.js';
import { loadPolicyFile } from '../policy/load.js';
import { verifiedSuggestion } from '../policy/suggest.js';
import type { Decision, EgressIntent, Policy } from '../policy/types.js';
import type { CliIo, Command } from './io.js';

const EXIT_OK = 0;
const EXIT_PROBLEMS = 1;
const EXIT_USAGE = 2;
const DEFAULT_PORTS: Readonly<Record<string, number>> = { 'http:': 80, 'https:': 443, 'ws:': 80, 'wss:': 443 };
const METHOD_TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

const USAGE = `Usage:
  boundary policy check FILE... [--json]
  boundary policy explain FILE TARGET [--method M] [--binary PATH] [--json]

check     Loads every FILE and prints each problem as  FILE:LINE:COL CODE PATH: MESSAGE
          and each warning as  FILE:LINE:COL WARN CODE PATH: MESSAGE.
          Exit 0 when every file loads (warnings included), 1 when any file has problems.
          --json   print one JSON array with an object per file:
                   { file, ok, problems: [{ code, path, line, column, message }], warnings: [...] }

explain   Decides one request or connection against FILE and prints the verdict, the deciding policy key
          and endpoint index, the reason and its detail; for a deny, also the smallest new
          network_policies entry that would allow it (checked by loading and deciding again).
          TARGET   https://host[:port]/path?query  (http, https, ws, wss; the port defaults from the
                   scheme; the method defaults to GET) or host:port (a connection-level decision).
                   The host is normalised (lower case, IDNA A-labels, canonical IPs); the query is
                   used for the decision but never printed.
          --method M      the HTTP method (or WEBSOCKET_TEXT); makes a host:port target a request for /
          --binary PATH   the executable making the request; without it, binaries are not checked
                          (endpoint-only mode, as in a sidecar without process identity)
          --json   print { verdict, policy, endpointIndex, reason, detail, layer, rule, suggestion?, hint? }
                   (suggestion is the YAML text of the new entry; hint says why none is offered)
          Exit 0 when allowed (or audited), 1 when denied.

Both exit 2 on a usage error; explain also exits 2 when FILE does not load.
  --help, -h   show this help
`;

class UsageError extends Error {}

interface FileReport {
  readonly file: string;
  readonly ok: boolean;
  readonly problems: readonly JsonIssue[];
  readonly warnings: readonly JsonIssue[];
}

interface JsonIssue {
  readonly code: ErrorCode;
  readonly path: string;
  readonly line: number | null;
  readonly column: number | null;
  readonly message: string;
}

export const policyCommand: Command = async function policyCommand(argv, io) {
  const [sub, ...rest] = argv;
  try {
    if (sub === '--help' || sub === '-h' || sub === 'help') {
      io.stdout.write(USAGE);
      return EXIT_OK;
    }
    if (sub === 'check') return await runCheck(rest, io);
    if (sub === 'explain') return await runExplain(rest, io);
    throw new UsageError(sub === undefined ? 'missing subcommand' : `unknown policy subcommand '${sub}'`);
  } catch (err) {
    if (err instanceof UsageError || (isBoundaryError(err) && err.code === 'USAGE')) {
      io.stderr.write(`boundary policy: ${err.message} (USAGE)\n\n${USAGE}`);
      return EXIT_USAGE;
    }
    throw err;
  }
};

const OPTIONS = {
  json: { type: 'boolean' },
  method: { type: 'string' },
  binary: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

function parse(args: readonly string[], allowed: readonly (keyof typeof OPTIONS)[]) {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  for (const name of Object.keys(parsed.values)) {
    if (name !== 'help' && !allowed.includes(name as keyof typeof OPTIONS)) throw new UsageError(`--${name} is not an option of this subcommand`);
  }
  return parsed;
}

async function runCheck(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args, ['json']);
  if (values.help === true) {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  if (positionals.length === 0) throw new UsageError('policy check needs at least one FILE');
  const reports: FileReport[] = [];
  for (const file of positionals) reports.push(await checkFile(file, io));
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify(reports, null, 2)}\n`);
  } else {
    for (const report of reports) io.stdout.write(renderReport(report));
  }
  return reports.every((r) => r.ok) ? EXIT_OK : EXIT_PROBLEMS;
}

async function checkFile(file: string, io: CliIo): Promise<FileReport> {
  try {
    const policy = await loadPolicyFile(resolve(io.cwd, file));
    return { file, ok: true, problems: [], warnings: policy.warnings.map(toJson) };
  } catch (err) {
    return { file, ok: false, problems: problemsOf(err), warnings: [] };
  }
}

function problemsOf(err: unknown): JsonIssue[] {
  if (!isBoundaryError(err)) throw err;
  if (err.issues.length > 0) return err.issues.map(toJson);
  return [{ code: err.code, path: '', line: null, column: null, message: err.message }];
}

function toJson(issue: Issue): JsonIssue {
  return { code: issue.code, path: issue.path, line: issue.line ?? null, column: issue.column ?? null, message: issue.message };
}

function renderIssue(file: string, issue: JsonIssue, label: string): string {
  const where = issue.line === null ? file : `${file}:${issue.line}:${issue.column ?? 1}`;
  const path = issue.path === '' ? '' : ` ${issue.path}:`;
  return `${where} ${label}${issue.code}${path} ${issue.message}\n`;
}

function renderReport(report: FileReport): string {
  let out = '';
  for (const problem of report.problems) out += renderIssue(report.file, problem, '');
  for (const warning of report.warnings) out += renderIssue(report.file, warning, 'WARN ');
  const count = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  out += report.ok
    ? `${report.file}: ok${report.warnings.length > 0 ? ` (${count(report.warnings.length, 'warning')})` : ''}\n`
    : `${report.file}: invalid (${count(report.problems.length, 'problem')})\n`;
  return out;
}

async function runExplain(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args, ['json', 'method', 'binary']);
  if (values.help === true) {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  const [file, target, ...extra] = positionals;
  if (file === undefined || target === undefined) throw new UsageError('policy explain needs FILE and TARGET');
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const binary = values.binary;
  if (binary !== undefined && !binary.startsWith('/')) throw new UsageError('--binary must be an absolute path');
  const intent = intentFor(target, values.method, binary);

  const path = resolve(io.cwd, file);
  let policy: Policy;
  let policyText: string;
  try {
    policy = await loadPolicyFile(path);
    policyText = await readFile(path, 'utf8');
  } catch (err) {
    const problems = problemsOf(err);
    for (const problem of problems) io.stderr.write(renderIssue(file, problem, ''));
    io.stderr.write(`boundary policy: ${file} did not load; run \`boundary policy check ${file}\`\n`);
    return EXIT_USAGE;
  }
  const decision = decide(policy, intent);
  const suggestion = decision.verdict === 'deny' ? verifiedSuggestion({ policy, policyText, intent, decision }) : undefined;
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify(explainJson(decision, suggestion), null, 2)}\n`);
  } else {
    io.stdout.write(renderExplain(intent, decision, suggestion));
  }
  return decision.verdict === 'deny' ? EXIT_PROBLEMS : EXIT_OK;
}

/** TARGET -> a normalised intent. The query is kept for decide() and never echoed. */
function intentFor(target: string, method: string | undefined, binary: string | undefined): EgressIntent {
  if (method !== undefined && !METHOD_TOKEN.test(method)) throw new UsageError(`--method '${method}' is not an HTTP method token`);
  const upper = method?.toUpperCase();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(target);
  let host: string;
  let port: number;
  let requestTarget: string | undefined;
  if (scheme) {
    const defaultPort = DEFAULT_PORTS[`${scheme[1]?.toLowerCase()}:`];
    if (defaultPort === undefined) throw new UsageError(`TARGET scheme '${scheme[1]}' is not http, https, ws or wss`);
    const rest = target.slice(scheme[0].length);
    const end = rest.search(/[/?#]/);
    const authority = end < 0 ? rest : rest.slice(0, end);
    const parsed = parseAuthority(authority, { defaultPort });
    if (!parsed.ok) throw new UsageError(`TARGET host: ${parsed.message}`);
    ({ host, port } = parsed);
    // Clients never send the fragment; drop it before canonicalising.
    // Spaces and non-ASCII typed into a URL are percent-encoded, as curl and browsers do.
    const tail = (end < 0 ? '' : rest.slice(end)).replace(/#.*$/s, '').replace(/[^\x21-\x7e]/gu, (c) => encodeURIComponent(c));
    requestTarget = tail === '' ? '/' : tail.startsWith('?') ? `/${tail}` : tail;
  } else {
    const parsed = parseAuthority(target);
    if (!parsed.ok) throw new UsageError(`TARGET must be a URL or host:port (${parsed.message})`);
    ({ host, port } = parsed);
    if (upper !== undefined) requestTarget = '/';
  }
  const base = { adapter: 'explain' as const, host, port, ...(binary === undefined ? {} : { binary }) };
  if (requestTarget === undefined) return base;
  // Encoded slashes are kept here; the endpoint's allow_encoded_slash is reported after the decision.
  const canonical = canonicalTarget(requestTarget, { allowEncodedSlash: true });
  if (!canonical.ok) throw new UsageError(`TARGET path is refused before any policy check (${canonical.problem})`);
  return { ...base, method: upper ?? 'GET', path: canonical.path, ...(canonical.query === '' ? {} : { query: canonical.query }) };
}

type SuggestionOutcome = ReturnType<typeof verifiedSuggestion> | undefined;

function explainJson(decision: Decision, suggestion: SuggestionOutcome): Record<string, unknown> {
  return {
    verdict: decision.verdict,
    policy: decision.policy ?? null,
    endpointIndex: decision.endpointIndex ?? null,
    reason: decision.reason,
    detail: decision.detail,
    layer: decision.layer,
    rule: decision.rule ?? null,
    ...(suggestion?.ok === true ? { suggestion: suggestion.suggestion.yaml } : {}),
    ...(suggestion?.ok === false ? { hint: suggestion.hint } : {}),
  };
}

function renderExplain(intent: EgressIntent, decision: Decision, suggestion: SuggestionOutcome): string {
  const request = intent.method === undefined ? 'connection' : `${intent.method} ${intent.path ?? '/'}`;
  const lines = [`${decision.verdict.toUpperCase()} ${request} to ${formatAuthority(intent.host, intent.port)}`];
  const row = (label: string, value: string) => lines.push(`  ${label.padEnd(9)}${value}`);
  row('verdict', decision.verdict);
  row('reason', decision.reason);
  const name = decision.policyName !== undefined && decision.policyName !== decision.policy ? ` (${decision.policyName})` : '';
  row('policy', decision.policy === undefined ? '-' : `${decision.policy}${name}`);
  row('endpoint', decision.endpointIndex === undefined ? '-' : String(decision.endpointIndex));
  if (decision.rule !== undefined) row('rule', decision.rule);
  row('layer', decision.layer);
  row('binary', intent.binary === undefined ? 'not checked (endpoint-only)' : `${intent.binary} (${decision.binaryIdentity})`);
  row('detail', decision.detail);
  if (intent.path?.includes('%2F') && decision.endpoint?.inspected && !decision.endpoint.allowEncodedSlash) {
    lines.push('  note     the path holds %2F: the proxy refuses it (400) unless the endpoint sets allow_encoded_slash');
  }
  let out = `${lines.join('\n')}\n`;
  if (suggestion?.ok === true) {
    const yaml = suggestion.suggestion.yaml.replace(/\n$/, '').replace(/^/gm, '    ');
    out += `\n  To allow it, add this entry:\n\n${yaml}\n`;
  } else if (suggestion?.ok === false) {
    out += `\n  No entry to suggest: ${suggestion.hint}\n`;
  }
  return out;
}
