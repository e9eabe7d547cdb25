// `boundary policy check`'s per-file work: load a policy (or parse a credentials file) and turn every problem and
// warning into a located JSON issue or a `FILE:LINE:COL CODE PATH: MESSAGE` line. `policy explain` prints a file
// that fails to load the same way. Never decides anything.

import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { loadClientCertificate } from '../../credentials/client-cert.js';
import { type CredentialsDocument, parseCredentials } from '../../credentials/parse.js';
import { type ErrorCode, isBoundaryError, type Issue } from '../../shared/errors.js';
import type { PermanentCheck } from '../../net/destination.js';
import { loadPolicyFile } from '../../policy/load.js';
import { loadYaml } from '../../policy/yaml-load.js';
import { nodeAt, position, readContext } from '../../policy/yaml-source.js';
import { parsePolicy } from '../../policy/parse.js';
import type { Policy } from '../../policy/types.js';
import type { CliIo } from './io.js';

export interface FileReport {
  readonly file: string;
  readonly ok: boolean;
  readonly problems: readonly JsonIssue[];
  readonly warnings: readonly JsonIssue[];
}

export interface JsonIssue {
  readonly code: ErrorCode;
  readonly path: string;
  readonly line: number | null;
  readonly column: number | null;
  readonly message: string;
}

export async function checkFile(file: string, io: CliIo, permanent: PermanentCheck, middlewareServices: readonly string[] = []): Promise<FileReport> {
  const path = resolve(io.cwd, file);
  let policy: Policy;
  try {
    policy = await loadPolicyFile(path, (text, options) => parsePolicy(text, { ...options, middlewareServices }));
  } catch (err) {
    return { file, ok: false, problems: problemsOf(err), warnings: [] };
  }
  const blocked = alwaysBlocked(policy, permanent);
  const located = blocked.length === 0 ? blocked : locate(blocked, await readFile(path, 'utf8'));
  return { file, ok: true, problems: [], warnings: [...policy.warnings.map(toJson), ...located] };
}

/** Line and column of each issue's `network_policies.<key>.endpoints[<i>].host` in the text the policy came from. */
function locate(issues: readonly JsonIssue[], text: string): JsonIssue[] {
  const root = loadYaml(text).contents;
  const ctx = readContext(text, undefined);
  return issues.map((issue) => {
    const at = /^network_policies\.(.+)\.endpoints\[(\d+)\]\.host$/.exec(issue.path);
    const node = at === null ? undefined : nodeAt(root, ['network_policies', at[1] as string, 'endpoints', Number(at[2]), 'host']);
    const where = position(ctx, node);
    return { ...issue, line: where.line ?? null, column: where.column ?? null };
  });
}

/**
 * Endpoints naming a destination the run refuses whatever the policy (net/destination.ts permanentRefusal): the same
 * check the proxy and explain make, so check never accepts in silence what explain and the proxy deny.
 */
function alwaysBlocked(policy: Policy, permanent: PermanentCheck): JsonIssue[] {
  const issues: JsonIssue[] = [];
  for (const entry of policy.entries) {
    entry.endpoints.forEach((endpoint, i) => {
      if (endpoint.host === undefined || (endpoint.hostKind !== 'exact' && endpoint.hostKind !== 'ip')) return;
      const host = endpoint.host;
      const blocked = endpoint.ports.map((port) => ({ port, found: permanent(host, port) })).filter((p) => p.found !== undefined);
      const first = blocked[0]?.found;
      if (first === undefined) return;
      const ports = blocked.map((p) => p.port).join(', ');
      issues.push({
        code: 'POLICY_WARN_ALWAYS_BLOCKED',
        path: `network_policies.${entry.key}.endpoints[${i}].host`,
        line: null,
        column: null,
        message: `${host} (port ${ports}) is always blocked (${first.check}, ${first.addressClass}): no policy can allow it, so this endpoint allows nothing there`,
      });
    });
  }
  return issues;
}

/** A credentials file as `run --credentials` reads it: parsed and validated, never its values printed. */
export async function checkCredentialsFile(file: string, io: CliIo): Promise<FileReport> {
  let text: string;
  try {
    text = await readFile(resolve(io.cwd, file), 'utf8');
  } catch (err) {
    const message = `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
    return { file, ok: false, problems: [{ code: 'CREDENTIALS_UNREADABLE', path: '', line: null, column: null, message }], warnings: [] };
  }
  let doc: CredentialsDocument;
  try {
    doc = parseCredentials(text, { source: file });
  } catch (err) {
    return { file, ok: false, problems: problemsOf(err), warnings: [] };
  }
  const problems = await clientCertificateProblems(doc, dirname(resolve(io.cwd, file)));
  return { file, ok: problems.length === 0, problems, warnings: [] };
}

/** Client certificate files are read and checked as a run would (their key against their certificate); values are not. */
async function clientCertificateProblems(doc: CredentialsDocument, base: string): Promise<JsonIssue[]> {
  const problems: JsonIssue[] = [];
  for (const provider of doc.providers) {
    const spec = provider.clientCertificate;
    if (spec === undefined) continue;
    try {
      await loadClientCertificate(spec, base);
    } catch (err) {
      for (const issue of problemsOf(err)) problems.push({ ...issue, path: spec.at.path, line: spec.at.line ?? null, column: spec.at.column ?? null });
    }
  }
  return problems;
}

export function problemsOf(err: unknown): JsonIssue[] {
  if (!isBoundaryError(err)) throw err;
  if (err.issues.length > 0) return err.issues.map(toJson);
  return [{ code: err.code, path: '', line: null, column: null, message: err.message }];
}

function toJson(issue: Issue): JsonIssue {
  return { code: issue.code, path: issue.path, line: issue.line ?? null, column: issue.column ?? null, message: issue.message };
}

export function renderIssue(file: string, issue: JsonIssue, label: string): string {
  const where = issue.line === null ? file : `${file}:${issue.line}:${issue.column ?? 1}`;
  const path = issue.path === '' ? '' : ` ${issue.path}:`;
  return `${where} ${label}${issue.code}${path} ${issue.message}\n`;
}

export function renderReport(report: FileReport): string {
  let out = '';
  for (const problem of report.problems) out += renderIssue(report.file, problem, '');
  for (const warning of report.warnings) out += renderIssue(report.file, warning, 'WARN ');
  const count = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  out += report.ok
    ? `${report.file}: ok${report.warnings.length > 0 ? ` (${count(report.warnings.length, 'warning')})` : ''}\n`
    : `${report.file}: invalid (${count(report.problems.length, 'problem')})\n`;
  return out;
}
