// Tells the outside world about one withdrawal: a command hook (argv, no shell) and/or a webhook; resolves when
// acknowledged, rejects saying why not. hook-runner.ts decides when to call it. Never decides a withdrawal.

import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { request as httpRequest } from '../shared/node-http.js';
import { request as httpsRequest } from 'node:https';
import { BoundaryError } from '../shared/errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { StoredWithdrawal } from './store/store.js';

/** A command or webhook that has not acknowledged within this long has failed (the command is killed). */
export const HOOK_TIMEOUT_MS = 30_000;
/** Bytes of a command's stdout and of its stderr kept (the tail) for the failure message. */
const MAX_HOOK_OUTPUT_BYTES = 16_384;
/** Lines of captured output quoted in a failure message. */
const HOOK_OUTPUT_TAIL_LINES = 10;
/** Bytes of a webhook's response body read for the failure message; the rest is discarded. */
const MAX_WEBHOOK_RESPONSE_BYTES = 4_096;
/** Characters of a failure message kept (in the store and in log lines). */
export const MAX_HOOK_ERROR_CHARS = 2_048;

const configInvalid = (message: string) => new BoundaryError('WITHDRAWAL_HOOK_CONFIG_INVALID', message);
const hookFailed = (message: string, cause?: unknown) =>
  new BoundaryError('WITHDRAWAL_HOOK_FAILED', message, cause === undefined ? {} : { cause });

export interface WithdrawalHookConfig {
  /** argv, run directly (no shell): stdin gets the withdrawal as one JSON line; exit 0 acknowledges. */
  readonly command?: readonly string[];
  /**
   * POSTed the withdrawal as JSON; any 2xx acknowledges. An http: URL is allowed, but the bearer token then
   * crosses the network in clear. https: verifies against caFile when given, else Node's default roots.
   */
  readonly webhook?: { readonly url: string; readonly tokenFile?: string; readonly caFile?: string };
  /** Per command and per webhook request; HOOK_TIMEOUT_MS when absent. */
  readonly timeoutMs?: number;
}

/** What the command (stdin) and the webhook (body) receive. */
interface WithdrawalNotice {
  readonly id: string;
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly reason: string;
  readonly at: string;
  readonly attempt: number;
}

function withdrawalNotice(withdrawal: StoredWithdrawal): WithdrawalNotice {
  const { id, sandboxId, instanceId, reason, at, attempts } = withdrawal;
  return { id, sandboxId, instanceId, reason, at: new Date(at).toISOString(), attempt: attempts };
}

/**
 * The delivery function for `config`: runs the command, then (if it acknowledged) the webhook; rejects with
 * WITHDRAWAL_HOOK_FAILED naming what failed. Throws WITHDRAWAL_HOOK_CONFIG_INVALID at once when the config cannot
 * work (empty argv, bad URL, unreadable file).
 * `env` is the environment the command inherits (main.ts passes its own); an empty one when absent.
 */
export function createHookDelivery(
  config: WithdrawalHookConfig,
  deps: { logger: Logger; env?: Readonly<Record<string, string | undefined>> },
): (withdrawal: StoredWithdrawal) => Promise<void> {
  const timeoutMs = config.timeoutMs ?? HOOK_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) throw configInvalid(`withdrawal hook timeout must be a positive integer of ms, got ${timeoutMs}`);
  if (config.command === undefined && config.webhook === undefined) throw configInvalid('withdrawal hook needs a command, a webhook or both');
  const command = config.command;
  if (command !== undefined && (command.length === 0 || command[0] === '')) throw configInvalid('withdrawal hook command needs a program (argv[0])');
  const webhook = config.webhook === undefined ? undefined : checkWebhook(config.webhook);
  const env = deps.env ?? {};
  const logger = deps.logger.child({ component: 'withdrawal-hook' });
  return async function deliverWithdrawal(withdrawal) {
    const notice = withdrawalNotice(withdrawal);
    if (command !== undefined) await runCommand(command, notice, env, timeoutMs);
    if (webhook !== undefined) await postWebhook(webhook, notice, timeoutMs);
    logger.debug({ withdrawalId: notice.id, attempt: notice.attempt }, 'withdrawal hook acknowledged');
  };
}

interface CheckedWebhook {
  readonly url: URL;
  readonly tokenFile: string | undefined;
  readonly caFile: string | undefined;
}

function checkWebhook(webhook: NonNullable<WithdrawalHookConfig['webhook']>): CheckedWebhook {
  let url: URL;
  try {
    url = new URL(webhook.url);
  } catch {
    throw configInvalid(`withdrawal webhook URL does not parse: ${JSON.stringify(webhook.url)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw configInvalid(`withdrawal webhook URL must be http: or https:, got ${url.protocol}`);
  if (url.username !== '' || url.password !== '') throw configInvalid('withdrawal webhook URL must not carry credentials; use the token file');
  if (webhook.caFile !== undefined && url.protocol !== 'https:') throw configInvalid('withdrawal webhook CA file given for an http: URL');
  // Both files are read again on every delivery (a rotated Secret applies); checked here so a typo fails at start.
  for (const file of [webhook.tokenFile, webhook.caFile]) {
    if (file === undefined) continue;
    try {
      accessSync(file, fsConstants.R_OK);
    } catch (err) {
      throw configInvalid(`withdrawal webhook cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
  }
  return { url, tokenFile: webhook.tokenFile, caFile: webhook.caFile };
}

/** Keeps the last `limit` bytes written. */
function tailBuffer(limit: number): { push(chunk: Buffer): void; text(): string } {
  let chunks: Buffer[] = [];
  let size = 0;
  return {
    push(chunk) {
      chunks.push(chunk);
      size += chunk.length;
      if (size > limit * 2) {
        const joined = Buffer.concat(chunks).subarray(-limit);
        chunks = [joined];
        size = joined.length;
      }
    },
    text: () => Buffer.concat(chunks).subarray(-limit).toString('utf8'),
  };
}

function lastLines(text: string): string {
  const lines = text.split('\n').map((line) => line.trimEnd()).filter((line) => line !== '');
  return lines.slice(-HOOK_OUTPUT_TAIL_LINES).join(' | ');
}

function runCommand(argv: readonly string[], notice: WithdrawalNotice, env: Readonly<Record<string, string | undefined>>, timeoutMs: number): Promise<void> {
  const [program, ...args] = argv as [string, ...string[]];
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      // Its own process group, so a timeout also kills what a script started (a sleep holding the pipes open).
      detached: true,
      env: {
        ...env,
        BOUNDARY_WITHDRAWAL_ID: notice.id,
        BOUNDARY_SANDBOX_ID: notice.sandboxId,
        BOUNDARY_INSTANCE_ID: notice.instanceId,
        BOUNDARY_WITHDRAWAL_REASON: notice.reason,
        BOUNDARY_WITHDRAWAL_AT: notice.at,
        BOUNDARY_WITHDRAWAL_ATTEMPT: String(notice.attempt),
      },
    });
    const stdout = tailBuffer(MAX_HOOK_OUTPUT_BYTES);
    const stderr = tailBuffer(MAX_HOOK_OUTPUT_BYTES);
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    // A hook may exit without reading stdin: the EPIPE that follows says nothing about the hook's verdict.
    child.stdin.on('error', () => {});
    child.stdin.end(`${JSON.stringify(notice)}\n`);
    let settled = false;
    const settle = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err === undefined) resolve();
      else reject(err);
    };
    const timer = setTimeout(() => {
      killGroup(child.pid, () => child.kill('SIGKILL'));
      child.stdout.destroy();
      child.stderr.destroy();
      const output = lastLines(stderr.text()) || lastLines(stdout.text());
      settle(hookFailed(`withdrawal hook ${program} gave no answer within ${timeoutMs} ms and was killed${output === '' ? '' : `: ${output}`}`));
    }, timeoutMs);
    timer.unref();
    child.on('error', (err: NodeJS.ErrnoException) => settle(hookFailed(`withdrawal hook ${program} could not run: ${err.code ?? err.message}`, err)));
    child.on('close', (code, signal) => {
      if (code === 0) return settle();
      const output = lastLines(stderr.text()) || lastLines(stdout.text());
      const how = code === null ? `was killed by ${signal}` : `exited with code ${code}`;
      settle(hookFailed(`withdrawal hook ${program} ${how}${output === '' ? ' (no output)' : `: ${output}`}`));
    });
  });
}

function killGroup(pid: number | undefined, fallback: () => void): void {
  if (pid === undefined) {
    fallback();
    return;
  }
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    fallback();
  }
}

async function postWebhook(webhook: CheckedWebhook, notice: WithdrawalNotice, timeoutMs: number): Promise<void> {
  const where = `${webhook.url.origin}${webhook.url.pathname}`;
  const token = webhook.tokenFile === undefined ? undefined : await readToken(webhook.tokenFile);
  const ca = webhook.caFile === undefined ? undefined : await readFile(webhook.caFile, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw hookFailed(`withdrawal webhook cannot read CA file ${webhook.caFile}: ${err.code ?? err.message}`, err);
  });
  const body = JSON.stringify(notice);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'idempotency-key': notice.id,
  };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const send = webhook.url.protocol === 'https:' ? httpsRequest : httpRequest;
  const response = await new Promise<{ status: number; excerpt: string }>((resolve, reject) => {
    // agent: false: one connection per delivery, so nothing lingers after close().
    const req = send(webhook.url, { method: 'POST', headers, agent: false, ...(ca === undefined ? {} : { ca }) }, (res) => {
      readExcerpt(res).then(
        (excerpt) => resolve({ status: res.statusCode ?? 0, excerpt }),
        (err: Error) => reject(hookFailed(`withdrawal webhook ${where} answered ${res.statusCode} but the body failed: ${err.message}`, err)),
      );
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    timer.unref();
    req.on('close', () => clearTimeout(timer));
    req.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(hookFailed(`withdrawal webhook ${where} failed: ${err.code !== undefined && !err.message.includes(err.code) ? `${err.code}: ` : ''}${err.message}`, err));
    });
    req.end(body);
  });
  if (response.status >= 200 && response.status < 300) return;
  // A receiver that echoes the request must not put the token into our logs.
  const excerpt = token === undefined ? response.excerpt : response.excerpt.replaceAll(token, '[redacted]');
  throw hookFailed(`withdrawal webhook ${where} answered ${response.status}${excerpt === '' ? '' : `: ${excerpt}`}`);
}

async function readToken(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw hookFailed(`withdrawal webhook cannot read token file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, err);
  }
  const token = text.trim();
  if (token === '') throw hookFailed(`withdrawal webhook token file ${file} is empty`);
  return token;
}

/** Up to MAX_WEBHOOK_RESPONSE_BYTES of the body as one line; the rest is drained unread. */
function readExcerpt(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      if (size >= MAX_WEBHOOK_RESPONSE_BYTES) return;
      chunks.push(chunk);
      size += chunk.length;
    });
    res.on('end', () => resolve(Buffer.concat(chunks).subarray(0, MAX_WEBHOOK_RESPONSE_BYTES).toString('utf8').replace(/\s+/g, ' ').trim()));
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(new Error('the response ended before its body did'));
    });
  });
}
