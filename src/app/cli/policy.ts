// `boundary policy check|explain`: validate policy files, and say which entry allows or denies one request
// and why. Parses its own arguments; loading and deciding belong to policy/, suggestions to policy/suggest.ts.

import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isBoundaryError } from '../../shared/errors.js';
import { formatAuthority } from '../../net/host.js';
import { type Explanation, explainIntent, explanationJson } from '../../policy/explain.js';
import { loadPolicyFile } from '../../policy/load.js';
import type { Decision, EgressIntent, Policy } from '../../policy/types.js';
import { intentFromTarget } from '../../proxy/explain-target.js';
import { type ReplayFields, replayFromUnmapped, replayTarget } from '../../telemetry/replay.js';
import type { CliIo, Command } from './io.js';
import { checkCredentialsFile, checkFile, type FileReport, problemsOf, renderIssue, renderReport } from './policy-check.js';

const EXIT_OK = 0;
const EXIT_PROBLEMS = 1;
const EXIT_USAGE = 2;
/** Largest --from-event input read: one event line is a few KiB; a log file is scanned whole. */
const MAX_EVENT_INPUT_BYTES = 16 * 1024 * 1024;

const USAGE = `Usage:
  boundary policy check FILE... [--credentials FILE]... [--json]
  boundary policy explain FILE TARGET [--method M] [--binary PATH] [--json]
  boundary policy explain FILE --from-event EVENT|- [--binary PATH] [--json]

check     Loads every FILE and prints each problem as  FILE:LINE:COL CODE PATH: MESSAGE
          and each warning as  FILE:LINE:COL WARN CODE PATH: MESSAGE.
          Exit 0 when every file loads (warnings included), 1 when any file has problems.
          --credentials FILE   also check a credentials file (repeatable): the same problems a run
                   would refuse it for, OpenShell fields boundary does not implement (token_grant,
                   auth_style, header_name) among them, named as CREDENTIALS_UNKNOWN_KEY
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
                          no ancestors; without it (and without one in --from-event's EVENT), binaries
                          are not checked, as with --binary-identity endpoint-only (docs/identity.md)
          --json   print { verdict, policy, endpointIndex, reason, detail, layer, rule, suggestion?, hint? }
                   (suggestion is the YAML text of the new entry; hint says why none is offered)
          --from-event EVENT   replay a logged denial instead of TARGET: EVENT is a file (or - for
                   standard input) holding a JSON log line with the event under "ocsf", or a bare
                   OCSF object; in a file of many lines the last denial is used. The method, scheme,
                   host, port, canonical path and query keys come from the event's unmapped.replay
                   (query values are never logged: each key is replayed with an empty value);
                   stderr says which fields were used, stdout is what explain prints for them.
          Exit 0 when allowed (or audited), 1 when denied.

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
  const { values, positionals } = parse(args, ['json', 'credentials']);
  if (values.help === true) {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  const credentials = values.credentials ?? [];
  if (positionals.length === 0 && credentials.length === 0) throw new UsageError('policy check needs at least one FILE');
  const reports: FileReport[] = [];
  for (const file of positionals) reports.push(await checkFile(file, io));
  for (const file of credentials) reports.push(await checkCredentialsFile(file, io));
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify(reports, null, 2)}\n`);
  } else {
    for (const report of reports) io.stdout.write(renderReport(report));
  }
  return reports.every((r) => r.ok) ? EXIT_OK : EXIT_PROBLEMS;
}

async function runExplain(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args, ['json', 'method', 'binary', 'from-event']);
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
  const parsed = intentFromTarget(question.target, { method: question.method, binary });
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
  const explanation = explainIntent(policy, policyText, intent);
  if (values.json === true) {
    io.stdout.write(`${JSON.stringify(explanationJson(explanation), null, 2)}\n`);
  } else {
    io.stdout.write(renderExplain(intent, explanation.decision, explanation.suggestion));
  }
  return explanation.decision.verdict === 'deny' ? EXIT_PROBLEMS : EXIT_OK;
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

type SuggestionOutcome = Explanation['suggestion'];

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
  row('binary', decision.binary === undefined ? 'not checked (endpoint-only)' : `${decision.binary} (${decision.binaryIdentity})`);
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
