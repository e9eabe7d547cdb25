// The policies folder of the reference supervisor: `<dir>/<sandbox-id>.yaml` or `<dir>/default.yaml`,
// each parsed (so a bad edit is caught here, not in every boundary) and watched. A file that stops
// parsing keeps its last valid version. Never pushes anything itself; it reports what changed.

import { type FSWatcher, watch } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isAtomicWriterEntry } from '../shared/file-watch.js';
import { isValidSandboxId } from '../pki/issue.js';
import type { Policy } from '../policy/types.js';
import { type PolicyReach, policyReach } from './credential-grants.js';

/** Below MAX_CONTROL_MESSAGE_BYTES with room for JSON escaping of the YAML text. */
export const MAX_POLICY_FILE_BYTES = 262_144;
export const MAX_POLICY_FILES = 10_000;
const WATCH_DEBOUNCE_MS = 25;
/** fs.watch can miss events (network filesystems, some editors); a periodic rescan catches up. */
const RESCAN_INTERVAL_MS = 5_000;
const DEFAULT_POLICY_NAME = 'default';

export interface PolicyVersion {
  readonly text: string;
  readonly hash: string;
  readonly file: string;
  /** What of it decides the sandbox's credential grants, taken from the parse that validated it. */
  readonly reach: PolicyReach;
}

interface FileState {
  text: string | undefined;
  valid: PolicyVersion | undefined;
  error: string | undefined;
  /** The error's code (POLICY_INVALID, or the errno of a file that cannot be read). */
  code: string | undefined;
}

/** Why the policy file a sandbox is served from does not parse now, and what is served meanwhile. */
export interface PolicyFileProblem {
  readonly kind: 'policy-file';
  readonly code?: string;
  readonly message: string;
}

type PolicyLookup =
  | { readonly ok: true; readonly policy: PolicyVersion }
  | { readonly ok: false; readonly code: 'unknown-sandbox' | 'policy-invalid'; readonly message: string };

export interface PolicyLibrary {
  start(): Promise<void>;
  close(): Promise<void>;
  /** Re-reads the folder; resolves with the names (sandbox ids or `default`) whose valid version changed. */
  rescan(): Promise<ReadonlySet<string>>;
  lookup(sandboxId: string): PolicyLookup;
  /** Files that currently fail to parse, with the error (kept for /readyz and logs). */
  errors(): ReadonlyMap<string, string>;
  /** The problem of the file `sandboxId` is served from (its own, else default.yaml), if that file is broken. */
  problemFor(sandboxId: string): PolicyFileProblem | undefined;
}

export function createPolicyLibrary(options: {
  dir: string;
  parsePolicy: (text: string, options?: { source?: string }) => Policy;
  onChange: (names: ReadonlySet<string>) => void;
  onError: (file: string, message: string) => void;
}): PolicyLibrary {
  const files = new Map<string, FileState>();
  let watcher: FSWatcher | undefined;
  let interval: NodeJS.Timeout | undefined;
  let debounce: NodeJS.Timeout | undefined;
  let running: Promise<ReadonlySet<string>> | undefined;
  let again = false;
  let closed = false;

  async function scanOnce(): Promise<Set<string>> {
    const changed = new Set<string>();
    // A ConfigMap mount holds `<name>.yaml -> ..data/<name>.yaml` beside the kubelet's `..data` bookkeeping:
    // stat follows the symlinks, and the `..` entries are never policies.
    const entries = (await readdir(options.dir))
      .filter((name) => name.endsWith('.yaml') && !isAtomicWriterEntry(name))
      .slice(0, MAX_POLICY_FILES);
    const present = new Set<string>();
    for (const entry of entries) {
      const name = entry.slice(0, -'.yaml'.length);
      if (name !== DEFAULT_POLICY_NAME && !isValidSandboxId(name)) continue;
      present.add(name);
      const file = join(options.dir, entry);
      let text: string;
      try {
        const info = await stat(file);
        if (!info.isFile()) continue;
        if (info.size > MAX_POLICY_FILE_BYTES) throw new Error(`larger than MAX_POLICY_FILE_BYTES (${MAX_POLICY_FILE_BYTES})`);
        text = await readFile(file, 'utf8');
      } catch (err) {
        // Deleted between readdir and read, or unreadable: the next event or rescan settles it.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') present.delete(name);
        else record(name, file, undefined, err, changed);
        continue;
      }
      const state = files.get(name);
      if (state?.text === text) continue;
      try {
        const policy = options.parsePolicy(text, { source: file });
        record(name, file, { text, hash: policy.hash, file, reach: policyReach(policy) }, undefined, changed);
      } catch (err) {
        record(name, file, undefined, err, changed);
      }
      const updated = files.get(name);
      if (updated !== undefined) updated.text = text;
    }
    for (const name of [...files.keys()]) {
      if (!present.has(name)) {
        files.delete(name);
        changed.add(name);
      }
    }
    return changed;
  }

  function record(name: string, file: string, valid: PolicyVersion | undefined, error: unknown, changed: Set<string>): void {
    const state = files.get(name) ?? { text: undefined, valid: undefined, error: undefined, code: undefined };
    files.set(name, state);
    if (valid !== undefined) {
      if (state.valid?.hash !== valid.hash) changed.add(name);
      state.valid = valid;
      state.error = undefined;
      state.code = undefined;
    } else {
      const code = (error as { code?: unknown } | undefined)?.code;
      state.error = error instanceof Error ? error.message : 'unknown error';
      state.code = typeof code === 'string' ? code : undefined;
      options.onError(file, state.error);
    }
  }

  // One scan at a time; events arriving meanwhile collapse into one more pass so the last write wins.
  function rescan(): Promise<ReadonlySet<string>> {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      const all = new Set<string>();
      do {
        again = false;
        try {
          for (const name of await scanOnce()) all.add(name);
        } catch (err) {
          options.onError(options.dir, (err as Error).message);
        }
      } while (again && !closed);
      return all;
    })().finally(() => {
      running = undefined;
    });
    return running.then((changed) => {
      if (changed.size > 0 && !closed) options.onChange(changed);
      return changed;
    });
  }

  function schedule(): void {
    if (closed) return;
    if (debounce !== undefined) clearTimeout(debounce);
    debounce = setTimeout(() => {
      debounce = undefined;
      void rescan();
    }, WATCH_DEBOUNCE_MS);
  }

  return {
    async start() {
      await rescan();
      watcher = watch(options.dir, { persistent: false }, schedule);
      watcher.on('error', (err) => options.onError(options.dir, `watch failed: ${err.message}; relying on the periodic rescan`));
      interval = setInterval(() => void rescan(), RESCAN_INTERVAL_MS);
      interval.unref();
    },
    async close() {
      closed = true;
      watcher?.close();
      if (interval !== undefined) clearInterval(interval);
      if (debounce !== undefined) clearTimeout(debounce);
      await running?.catch(() => undefined);
    },
    rescan,
    lookup(sandboxId) {
      const own = files.get(sandboxId);
      if (own !== undefined) {
        if (own.valid !== undefined) return { ok: true, policy: own.valid };
        return { ok: false, code: 'policy-invalid', message: `${sandboxId}.yaml does not parse: ${own.error ?? 'unknown error'}` };
      }
      const fallback = files.get(DEFAULT_POLICY_NAME);
      if (fallback?.valid !== undefined) return { ok: true, policy: fallback.valid };
      if (fallback !== undefined) {
        return { ok: false, code: 'policy-invalid', message: `default.yaml does not parse: ${fallback.error ?? 'unknown error'}` };
      }
      return { ok: false, code: 'unknown-sandbox', message: `no policy for sandbox ${sandboxId} (neither ${sandboxId}.yaml nor default.yaml)` };
    },
    problemFor(sandboxId) {
      const name = files.has(sandboxId) ? sandboxId : DEFAULT_POLICY_NAME;
      const state = files.get(name);
      if (state?.error === undefined) return undefined;
      const served = state.valid === undefined ? 'no valid version to serve' : 'its last valid version is still served';
      const message = `${name}.yaml does not parse (${served}): ${state.error}`;
      return state.code === undefined ? { kind: 'policy-file', message } : { kind: 'policy-file', code: state.code, message };
    },
    errors() {
      const out = new Map<string, string>();
      for (const [name, state] of files) if (state.error !== undefined) out.set(name, state.error);
      return out;
    },
  };
}
