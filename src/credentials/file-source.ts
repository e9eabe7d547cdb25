// Standalone credentials: the YAML file (`boundary run --credentials FILE`), its value_from references
// (files relative to it, variables from an injected env object, never process.env), and an fs.watch on
// the directories involved so a rotation reaches the next request. An invalid reload keeps the last good set.

import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { BoundaryError, type Issue } from '../shared/errors.js';
import { type ClientCertificate, loadClientCertificate } from './client-cert.js';
import { type ClientCertificateSpec, type CredentialsDocument, type EnvEntrySpec, MAX_CREDENTIALS_FILE_BYTES, parseCredentials } from './parse.js';
import type { TokenGrantInput } from './grant.js';
import { Secret } from './secret.js';
import type { PlaceholderFormat } from './shaped.js';
import { type CredentialSet, createCredentialSet, type ProviderInput, secretValueProblem } from './set.js';
import { type CredentialListener, type CredentialSource, createSetHolder } from './source.js';

/** A value_from file larger than this is refused before decoding (a secret is at most MAX_SECRET_CHARS). */
const MAX_VALUE_FILE_BYTES = 262_144;
/** At most this many directories are watched (the file's own plus those of value_from files). */
const MAX_WATCHED_DIRS = 64;

type CredentialEnv = Readonly<Record<string, string | undefined>>;

interface FileCredentialSourceOptions {
  readonly path: string;
  /** Where value_from.env reads; main.ts passes process.env, tests pass an object. */
  readonly env: CredentialEnv;
  readonly watch?: boolean;
  readonly onChange?: CredentialListener;
  /** A reload failed (unreadable, invalid, watcher error); the last good set stays current. */
  readonly onError?: (error: BoundaryError) => void;
}

export interface FileCredentialSource extends CredentialSource {
  /** Re-reads now. Resolves with the current set (unchanged when nothing changed); rejects when invalid. */
  reload(): Promise<CredentialSet>;
}

export interface Loaded {
  readonly providers: readonly ProviderInput[];
  readonly dirs: ReadonlySet<string>;
}

async function readText(path: string, limit: number): Promise<string> {
  const bytes = await readFile(path);
  if (bytes.length > limit) throw new Error(`larger than ${limit} bytes`);
  return bytes.toString('utf8');
}

function located(entry: EnvEntrySpec, code: Issue['code'], message: string, source: string): Issue {
  return { code, message, source, ...entry.at };
}

async function resolveEntry(
  entry: EnvEntrySpec,
  base: string,
  env: CredentialEnv,
  source: string,
  issues: Issue[],
): Promise<Secret | undefined> {
  const spec = entry.value;
  let value: string;
  if (spec.kind === 'literal') return spec.value;
  if (spec.kind === 'env') {
    const found = env[spec.name];
    if (found === undefined) {
      issues.push(located(entry, 'CREDENTIALS_VALUE_SOURCE', 'value_from.env names an unset variable', source));
      return undefined;
    }
    value = found;
  } else {
    try {
      // Secret files usually end with one newline (`echo x > file`); that newline is not part of the value.
      value = (await readText(resolve(base, spec.path), MAX_VALUE_FILE_BYTES)).replace(/\r?\n$/, '');
    } catch (err) {
      const why = err instanceof Error && 'code' in err ? String(err.code) : (err as Error).message;
      issues.push(located(entry, 'CREDENTIALS_VALUE_SOURCE', `value_from.file could not be read (${why})`, source));
      return undefined;
    }
  }
  const problem = secretValueProblem(value);
  if (problem === undefined) return new Secret(value);
  issues.push(located(entry, 'CREDENTIALS_VALUE_INVALID', `value ${problem}`, source));
  return undefined;
}

/** Reads a provider's certificate files; their directories are watched like value_from files, so a rotation is seen. */
async function resolveClientCertificate(
  spec: ClientCertificateSpec | undefined,
  base: string,
  dirs: Set<string>,
  source: string,
  issues: Issue[],
): Promise<ClientCertificate | undefined> {
  if (spec === undefined) return undefined;
  for (const file of [spec.cert, spec.key, spec.chain]) if (file !== undefined) dirs.add(dirname(resolve(base, file)));
  try {
    return await loadClientCertificate(spec, base);
  } catch (err) {
    if (!(err instanceof BoundaryError)) throw err;
    issues.push({ code: err.code, message: err.message, source, ...spec.at });
    return undefined;
  }
}

async function resolveDocument(doc: CredentialsDocument, path: string, env: CredentialEnv): Promise<Loaded> {
  const base = dirname(path);
  const issues: Issue[] = [];
  const dirs = new Set<string>([base]);
  const providers: ProviderInput[] = [];
  for (const provider of doc.providers) {
    const values: Record<string, Secret> = {};
    const formats: Record<string, PlaceholderFormat> = {};
    for (const entry of provider.env) if (entry.format !== undefined) formats[entry.key] = entry.format;
    const resolveOne = async (entry: EnvEntrySpec): Promise<Secret | undefined> => {
      if (entry.value.kind === 'file') dirs.add(dirname(resolve(base, entry.value.path)));
      return resolveEntry(entry, base, env, path, issues);
    };
    for (const entry of provider.env) {
      const secret = await resolveOne(entry);
      if (secret !== undefined) values[entry.key] = secret;
    }
    const grants: TokenGrantInput[] = [];
    for (const { at: _at, clientSecret, refreshToken, ...grant } of provider.grants) {
      const secret = clientSecret === undefined ? undefined : await resolveOne(clientSecret);
      const refresh = refreshToken === undefined ? undefined : await resolveOne(refreshToken);
      grants.push({ ...grant, clientSecret: secret, refreshToken: refresh });
    }
    const clientCertificate = await resolveClientCertificate(provider.clientCertificate, base, dirs, path, issues);
    providers.push({
      name: provider.name,
      env: values,
      endpoints: provider.endpoints,
      grants,
      ...(clientCertificate === undefined ? {} : { clientCertificate }),
      ...(Object.keys(formats).length === 0 ? {} : { formats }),
    });
  }
  if (issues.length > 0) {
    throw new BoundaryError('CREDENTIALS_INVALID', `credentials: ${issues.length} value(s) could not be resolved`, {
      issues,
    });
  }
  return { providers, dirs };
}

/** Reads, validates and resolves the file once. Throws CREDENTIALS_UNREADABLE or CREDENTIALS_INVALID. */
async function loadCredentialsFile(path: string, env: CredentialEnv): Promise<Loaded> {
  let text: string;
  try {
    text = await readText(path, MAX_CREDENTIALS_FILE_BYTES);
  } catch (err) {
    throw new BoundaryError('CREDENTIALS_UNREADABLE', `cannot read credentials file ${path}`, { cause: err });
  }
  return resolveDocument(parseCredentials(text, { source: path }), path, env);
}

function asBoundaryError(err: unknown): BoundaryError {
  if (err instanceof BoundaryError) return err;
  return new BoundaryError('CREDENTIALS_UNREADABLE', 'credentials reload failed', { cause: err });
}

/** Loads the file (throwing when the first load fails) and, with `watch`, follows its changes. */
export async function createFileCredentialSource(options: FileCredentialSourceOptions): Promise<FileCredentialSource> {
  const path = resolve(options.path);
  const first = await loadCredentialsFile(path, options.env);
  const holder = createSetHolder(createCredentialSet({ providers: first.providers, revision: 1 }));
  if (options.onChange !== undefined) holder.subscribe(options.onChange);
  const watchers = new Map<string, FSWatcher>();
  let closed = false;
  let running: Promise<void> | undefined;
  let again = false;

  async function reloadOnce(): Promise<CredentialSet> {
    const loaded = await loadCredentialsFile(path, options.env);
    if (closed) return holder.current();
    if (options.watch === true) follow(loaded.dirs);
    return holder.offer(loaded.providers) ?? holder.current();
  }

  function report(err: unknown): void {
    if (!closed) options.onError?.(asBoundaryError(err));
  }

  // One reload at a time; events that arrive meanwhile collapse into one more pass, so the last write wins.
  function trigger(): void {
    if (closed) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        await reloadOnce().catch(report);
      } while (again && !closed);
    })().finally(() => {
      running = undefined;
    });
  }

  function follow(dirs: ReadonlySet<string>): void {
    for (const [dir, watcher] of watchers) {
      if (!dirs.has(dir)) {
        watcher.close();
        watchers.delete(dir);
      }
    }
    for (const dir of dirs) {
      if (watchers.has(dir) || watchers.size >= MAX_WATCHED_DIRS) continue;
      try {
        // The directory, not the file: editors and Kubernetes secret mounts replace files by rename.
        const watcher = watch(dir, { persistent: true }, trigger);
        watcher.on('error', (err) => {
          report(new BoundaryError('CREDENTIALS_UNREADABLE', 'watching the credentials directory failed', { cause: err }));
          watcher.close();
          watchers.delete(dir);
        });
        watchers.set(dir, watcher);
      } catch (err) {
        report(new BoundaryError('CREDENTIALS_UNREADABLE', 'cannot watch the credentials directory', { cause: err }));
      }
    }
  }

  if (options.watch === true) follow(first.dirs);
  return {
    current: holder.current,
    subscribe: holder.subscribe,
    reload: reloadOnce,
    async close() {
      closed = true;
      for (const watcher of watchers.values()) watcher.close();
      watchers.clear();
      await running;
    },
  };
}
