// Keeps the policy store in step with one policy file: follows edits, editor renames and ConfigMap swaps,
// re-reads after a short settle, swaps a changed policy in as a new generation, and on an invalid one
// keeps the last good policy (or publishes deny-all). Emits CONFIG events; never decides a request.

import type { Issue } from '../shared/errors.js';
import { isBoundaryError } from '../shared/errors.js';
import { type FileWatch, watchFile } from '../shared/file-watch.js';
import { loadPolicyFile, type PolicyParser } from './load.js';
import { emptyPolicy, type PolicyStore } from './store.js';
import type { Policy } from './types.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';

/** A save is often several writes; events inside this window are read once, after the last one. */
const POLICY_RELOAD_SETTLE_MS = 100;
/** Issues quoted in a CONFIG:FAILED event; the log line carries all of them. */
const MAX_ISSUES_IN_EVENT = 5;

export interface PolicyFileWatcher {
  /** Loads the file once; throws POLICY_INVALID / POLICY_UNREADABLE (start refuses a bad first policy). */
  loadInitial(): Promise<Policy>;
  /** Re-reads now; resolves when the result is applied or refused. */
  reload(): Promise<void>;
  start(): void;
  close(): void;
}

function summarise(err: unknown): { message: string; issues: readonly Issue[] } {
  if (isBoundaryError(err)) return { message: err.message, issues: err.issues };
  return { message: err instanceof Error ? err.message : String(err), issues: [] };
}

export function createPolicyFileWatcher(options: {
  readonly path: string;
  readonly store: PolicyStore;
  readonly sink: AuditSink;
  readonly logger: Logger;
  readonly onInvalid: 'keep' | 'deny-all';
  /** Parses the file's text (default parsePolicy); see loadPolicyFile. */
  readonly parse?: PolicyParser;
  /** Parses a reload's text (default `parse`): policy/parse-off-thread.ts keeps the event loop serving meanwhile. */
  readonly reloadParse?: PolicyParser;
}): PolicyFileWatcher {
  const { path, store, sink, logger } = options;
  let watcher: FileWatch | undefined;
  let running: Promise<void> | undefined;
  let again = false;

  function loaded(policy: Policy, source: string): void {
    sink.emit({
      class: 'CONFIG',
      activity: 'LOADED',
      severity: 'INFO',
      message: `policy loaded from ${source}`,
      generation: policy.generation,
      policyHash: policy.hash,
      unmapped: { source, endpoints: policy.endpoints.length, warnings: policy.warnings.length },
    });
  }

  async function readOnce(): Promise<void> {
    let policy: Policy;
    try {
      policy = await loadPolicyFile(path, options.reloadParse ?? options.parse);
    } catch (err) {
      const { message, issues } = summarise(err);
      logger.error({ issues, path }, `policy reload refused: ${message}`);
      const quoted = issues.slice(0, MAX_ISSUES_IN_EVENT).map((i) => `${i.path}: ${i.message}`);
      sink.emit({
        class: 'CONFIG',
        activity: 'FAILED',
        severity: 'MED',
        message: `policy ${path} refused; ${options.onInvalid === 'keep' ? 'keeping the last good policy' : 'denying all egress'}`,
        detail: quoted.length > 0 ? quoted.join('; ') : message,
        generation: store.current().generation,
        policyHash: store.current().hash,
        unmapped: { source: path, issues: issues.length, mode: options.onInvalid },
      });
      if (options.onInvalid === 'deny-all') {
        const next = store.swap(emptyPolicy());
        loaded(next, 'deny-all quarantine');
      }
      return;
    }
    // Same behaviour as what is running: nothing to apply, no relay touched (CP-06).
    if (store.hasPolicy() && policy.hash === store.current().hash) return;
    sink.emit({ class: 'CONFIG', activity: 'DETECTED', severity: 'INFO', message: `policy change detected in ${path}`, policyHash: policy.hash });
    loaded(store.swap(policy), path);
  }

  function reload(): Promise<void> {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await readOnce();
        } while (again);
      } finally {
        running = undefined;
      }
    })();
    return running;
  }

  return {
    async loadInitial() {
      const policy = await loadPolicyFile(path, options.parse);
      const current = store.swap(policy);
      loaded(current, path);
      return current;
    },
    reload,
    start() {
      watcher = watchFile({
        path,
        settleMs: POLICY_RELOAD_SETTLE_MS,
        onChange: () => reload().catch((err: unknown) => logger.error({ err }, 'policy reload failed')),
        onError: (err) => logger.error({ err, path }, 'policy watch failed; reloads stop'),
      });
    },
    close() {
      watcher?.close();
      watcher = undefined;
    },
  };
}
