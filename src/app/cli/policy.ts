// `boundary policy check|explain`: validate policy files, and say which entry allows or denies one request
// and why. Parses its own arguments; loading and deciding belong to policy/, suggestions to policy/suggest.ts.

import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isBoundaryError } from '../../shared/errors.js';
import { formatAuthority } from '../../net/host.js';
import { ALWAYS_BLOCKED_REASON, blockedHint, type Explanation, explainedVerdict, explainIntent, explanationJson } from '../../policy/explain.js';
import { loadPolicyFile } from '../../policy/load.js';
import type { Decision, EgressIntent, Policy } from '../../policy/types.js';
import { intentFromTarget } from '../../proxy/explain-target.js';
import { type ReplayFields, replayFromUnmapped, replayTarget } from '../../telemetry/replay.js';
import type { CliIo, Command } from './io.js';
import { loadRegistrationsFile } from '../../middleware/registrations.js';
import { checkCredentialsFile, checkFile, type FileReport, problemsOf, renderIssue, renderReport } from './policy-check.js';
import { RUN_VIEW_OPTIONS, RUN_VIEW_USAGE, type RunView, type RunViewFlags, runViewOf } from './run-view.js';

const EXIT_OK = 0;
const EXIT_PROBLEMS = 1;
const EXIT_USAGE = 2;
/** Largest --from-event input read: one event line is a few KiB; a log file is scanned whole. */
const MAX_EVENT_INPUT_BYTES = 16 * 1024 * 1024;

const USAGE = `Usage:
  boundary policy check FILE... [--credentials FILE]... [--middleware-config FILE] [--json] [RUN FLAGS]
  boundary policy explain FILE TARGET [--method M] [--binary PATH] [--json] [RUN FLAGS]
  boundary policy explain FILE --from-event EVENT|- [--binary PATH] [--json] [RUN FLAGS]

check     Loads every FILE and prints each problem as  FILE:LINE:COL CODE PATH: MESSAGE
          and each warning as  FILE:LINE:COL WARN CODE PATH: MESSAGE.
          Exit 0 when every file loads (warnings included), 1 when any file has problems.
          --credentials FILE   also check a credentials file (repeatable): the same problems a run
                   would refuse it for, OpenShell fields boundary does not implement (token_grant,
                   auth_style, header_name) among them, named as CREDENTIALS_UNKNOWN_KEY
          --middleware-config FILE   the middleware services run would register: entries naming
                   them load (their configs are not sent to the services; run checks those)
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
          --binary PATH   the executable making the request, as the kernel names it (readlink -f), with
                          no ancestors; without it (and without one in --from-event's EVENT), only entries
                          listing "/**" match, as a run that looked no process up (docs/identity.md)
          --json   print { verdict, policy, endpointIndex, reason, detail, layer, rule, binaryIdentity,
                   check?, addressClass?, suggestion?, hint? }
                   (suggestion is the YAML text of the new entry; hint says why none is offered)
          --from-event EVENT   replay a logged denial instead of TARGET: EVENT is a file (or - for
                   standard input) holding a JSON log line with the event under "ocsf", or a bare
                   OCSF object; in a file of many lines the last denial is used. The method, scheme,
                   host, port, canonical path and query keys come from the event's unmapped.replay
                   (query values are never logged: each key is replayed with an empty value);
                   stderr says which fields were used, stdout is what explain prints for them.
          Exit 0 when allowed (or audited), 1 when denied.

Both decide as \`boundary run\` would with the same flags: a destination the run always blocks (a metadata or
local name, an always-blocked address such as 169.254.169.254 or 127.0.0.1, boundary's own listener) is DENY
in explain with its check and address class, and a POLICY_WARN_ALWAYS_BLOCKED warning in check.
${RUN_VIEW_USAGE}
Both exit 2 on a usage error; explain also exits 2 when FILE does not load.
  --help, -h   show this help
`;

class UsageError extends Error {}

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
  'from-event': { type: 'string' },
  credentials: { type: 'string', multiple: true },
  'middleware-config': { type: 'string' },
  ...RUN_VIEW_OPTIONS,
  help: { type: 'boolean', short: 'h' },
} as const;

const RUN_VIEW_FLAGS = Object.keys(RUN_VIEW_OPTIONS) as (keyof typeof RUN_VIEW_OPTIONS)[];

/** The run the flags describe; a bad value is a usage error naming the flag. */
function viewOf(values: RunViewFlags): RunView {
  try {
    return runViewOf(values);
  } catch (err) {
    if (isBoundaryError(err)) throw new UsageError(err.issues.map((i) => `${i.path}: ${i.message}`).join('; ') || err.message);
    throw err;
  }
}

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
  const { values, positionals } = parse(args, ['json', 'credentials', 'middleware-config', ...RUN_VIEW_FLAGS]);
  if (values.help === true) {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  const credentials = values.credentials ?? [];
  if (positionals.length === 0 && credentials.length === 0) throw new UsageError('policy check needs at least one FILE');
  const view = viewOf(values);
  const config = values['middleware-config'];
  const services = config === undefined ? [] : (await loadRegistrationsFile(resolve(io.cwd, config))).map((r) => r.name);
  const reports: FileReport[] = [];
  for (const file of positionals) reports.push(await checkFile(file, io, view.permanent, services));
  for (const file of credentials) reports.push(await checkCredentialsFile(file, io));
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify(reports, null, 2)}\n`);
  } else {
    for (const report of reports) io.stdout.write(renderReport(report));
  }
  return reports.every((r) => r.ok) ? EXIT_OK : EXIT_PROBLEMS;
}

async function runExplain(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args, ['json', 'method', 'binary', 'from-event', ...RUN_VIEW_FLAGS]);
  if (values.help === true) {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  const fromEvent = values['from-event'];
  const [file, target, ...extra] = positionals;
  if (file === undefined || (target === undefined && fromEvent === undefined)) throw new UsageError('policy explain needs FILE and TARGET (or --from-event)');
  if (fromEvent !== undefined && target !== undefined) throw new UsageError('give TARGET or --from-event, not both');
  if (fromEvent !== undefined && values.method !== undefined) throw new UsageError('--method comes from the event with --from-event');
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  let question: { target: string; method?: string | undefined } = { target: target ?? '', method: values.method };
  let binary = values.binary;
  if (fromEvent !== undefined) {
    const replay = await readReplay(fromEvent, io);
    question = replayTarget(replay.fields);
    binary ??= replay.fields.binary;
    io.stderr.write(describeReplay(replay.fields, replay.source, question));
  }
  const view = viewOf(values);
  const parsed = intentFromTarget(question.target, { method: question.method, binary, binaryIdentity: view.binaryIdentity });
  if (!parsed.ok) throw new UsageError(parsed.message);
  const intent = parsed.intent;

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
  const explanation = explainIntent(policy, policyText, intent, view.permanent);
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify(explanationJson(explanation), null, 2)}\n`);
  } else {
    io.stdout.write(renderExplain(intent, explanation));
  }
  return explainedVerdict(explanation) === 'deny' ? EXIT_PROBLEMS : EXIT_OK;
}

/**
 * --from-event: one logged event, as a pino JSON line (the OCSF object under `ocsf`) or a bare OCSF object. A
 * file of several lines is read line by line, and the last event with replay fields is used.
 */
async function readReplay(from: string, io: CliIo): Promise<{ fields: ReplayFields; source: string }> {
  let text: string;
  if (from === '-') {
    if (io.stdin === undefined) throw new UsageError('--from-event - needs standard input');
    text = await readBounded(io.stdin);
  } else {
    const path = resolve(io.cwd, from);
    try {
      const info = await stat(path);
      if (info.size > MAX_EVENT_INPUT_BYTES) throw new UsageError(`--from-event ${from} is larger than ${MAX_EVENT_INPUT_BYTES} bytes`);
      text = await readFile(path, 'utf8');
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`cannot read --from-event ${from}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
  }
  for (const candidate of [text, ...text.split('\n').reverse()]) {
    const fields = replayOfJson(candidate);
    if (fields !== undefined) return { fields, source: from === '-' ? 'standard input' : from };
  }
  throw new UsageError('--from-event found no event with unmapped.replay (only denials carry it; docs/events.md#replaying-a-denial)');
}

function replayOfJson(text: string): ReplayFields | undefined {
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const ocsf = (value as { ocsf?: unknown }).ocsf;
  const event = typeof ocsf === 'object' && ocsf !== null ? ocsf : value;
  return replayFromUnmapped((event as { unmapped?: unknown }).unmapped);
}

async function readBounded(stream: AsyncIterable<string | Uint8Array>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const bytes = Buffer.from(chunk);
    size += bytes.length;
    if (size > MAX_EVENT_INPUT_BYTES) throw new UsageError(`--from-event - read more than ${MAX_EVENT_INPUT_BYTES} bytes`);
    chunks.push(bytes);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Says on stderr which of the event's fields the question was rebuilt from, so stdout stays explain's own output. */
function describeReplay(fields: ReplayFields, source: string, asked: { target: string; method?: string | undefined }): string {
  const used = Object.keys(fields).map((k) => `unmapped.replay.${k}`).join(', ');
  const keys = fields.query_keys === undefined || fields.query_keys.length === 0 ? '' : ' (query values are never logged: each key is replayed with an empty value)';
  const cut = fields.query_keys_truncated === true ? '; the event had more query keys than it kept' : '';
  const question = asked.method === undefined ? `connection to ${asked.target}` : `${asked.method} ${asked.target}`;
  return `boundary policy: replaying ${question} from ${source}, using ${used}${keys}${cut}\n`;
}

/** What the binaries were checked against: the named binary, none (run's mode: only `/**` entries match), or nothing. */
function binaryRow(decision: Decision): string {
  if (decision.binary !== undefined) return `${decision.binary} (${decision.binaryIdentity})`;
  if (decision.binaryIdentity === 'endpoint-only') return 'not checked (endpoint-only)';
  if (decision.binaryIdentity === 'not-needed') return 'any (the matching entries list "/**")';
  return `none named (${decision.binaryIdentity}): only entries listing "/**" match; --binary PATH names one`;
}

function renderExplain(intent: EgressIntent, explanation: Explanation): string {
  const { decision, suggestion, blocked } = explanation;
  const request = intent.method === undefined ? 'connection' : `${intent.method} ${intent.path ?? '/'}`;
  const lines = [`${explainedVerdict(explanation).toUpperCase()} ${request} to ${formatAuthority(intent.host, intent.port)}`];
  const row = (label: string, value: string) => lines.push(`  ${label.padEnd(9)}${value}`);
  if (blocked !== undefined) {
    row('verdict', 'deny');
    row('reason', `${ALWAYS_BLOCKED_REASON} (always blocked)`);
    row('check', blocked.check);
    row('class', blocked.addressClass);
    row('detail', blocked.message);
    return `${lines.join('\n')}\n\n  No entry to suggest: ${suggestion?.ok === false ? suggestion.hint : blockedHint(blocked)}\n`;
  }
  row('verdict', decision.verdict);
  row('reason', decision.reason);
  const name = decision.policyName !== undefined && decision.policyName !== decision.policy ? ` (${decision.policyName})` : '';
  row('policy', decision.policy === undefined ? '-' : `${decision.policy}${name}`);
  row('endpoint', decision.endpointIndex === undefined ? '-' : String(decision.endpointIndex));
  if (decision.rule !== undefined) row('rule', decision.rule);
  row('layer', decision.layer);
  row('binary', binaryRow(decision));
  row('detail', decision.detail);
  const endpoint = decision.endpoint;
  const escapes = [
    ['%2F', endpoint?.allowEncodedSlash, 'allow_encoded_slash'],
    ['%5C', endpoint?.allowEncodedBackslash, 'allow_encoded_backslash'],
    ['%00', endpoint?.allowEncodedNul, 'allow_encoded_nul'],
  ] as const;
  for (const [kept, allowed, option] of escapes) {
    if (intent.path?.includes(kept) && endpoint?.inspected && allowed !== true) {
      lines.push(`  note     the path holds ${kept}: the proxy refuses it (400) unless the endpoint sets ${option}`);
    }
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
