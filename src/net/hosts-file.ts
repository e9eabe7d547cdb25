// The `--hosts` file, kept current: read once at start (a failure there stops the start), then followed
// through edits, renames and ConfigMap swaps. A change of content (by hash) replaces the table and tells
// subscribers (the resolver cache forgets its answers); a broken read keeps the last good table and logs.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { type FileWatch, watchFile } from '../shared/file-watch.js';
import { coalesceReloads } from '../shared/reload-queue.js';
import { type HostsTable, MAX_HOSTS_ENTRIES, parseHostsFile } from './hosts.js';

/** Events inside this window are read once, after the last one. */
const HOSTS_RELOAD_SETTLE_MS = 100;
/** A larger file is refused (generous: MAX_HOSTS_ENTRIES entries of long names fit). */
const MAX_HOSTS_FILE_BYTES = MAX_HOSTS_ENTRIES * 512;

interface HostsFile {
  /** A live view that always answers from the current table: hand it to createUpstreamResolver once. */
  readonly table: HostsTable;
  /** Called after the table changed. */
  subscribe(listener: (table: HostsTable) => void): () => void;
  /** Re-reads now; resolves true when the content changed and the table was replaced. */
  reload(): Promise<boolean>;
  close(): void;
}

async function readHosts(path: string): Promise<Buffer> {
  const bytes = await readFile(path);
  if (bytes.length > MAX_HOSTS_FILE_BYTES) throw new Error(`${path} is larger than ${MAX_HOSTS_FILE_BYTES} bytes`);
  return bytes;
}

function digest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The three log calls this file makes; a pino Logger (telemetry/logger.ts) fits, so net/ imports nothing from telemetry/. */
interface HostsFileLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export async function openHostsFile(options: { readonly path: string; readonly logger: HostsFileLog; readonly watch?: boolean }): Promise<HostsFile> {
  const { path, logger } = options;
  const first = await readHosts(path);
  let hash = digest(first);
  let current = parseHostsFile(first.toString('utf8'));
  const listeners = new Set<(table: HostsTable) => void>();

  function report(table: HostsTable): void {
    if (table.issues.length > 0) logger.warn({ path, issues: table.issues }, `hosts file: ${table.issues.length} line(s) skipped`);
  }

  async function readOnce(): Promise<boolean> {
    let bytes: Buffer;
    try {
      bytes = await readHosts(path);
    } catch (err) {
      logger.error({ err, path }, 'hosts file reload failed; the last good table stays in use');
      return false;
    }
    const next = digest(bytes);
    if (next === hash) return false;
    hash = next;
    current = parseHostsFile(bytes.toString('utf8'));
    report(current);
    logger.info({ path, entries: current.size }, 'hosts file reloaded');
    for (const listener of [...listeners]) listener(current);
    return true;
  }

  // One read at a time; events meanwhile collapse into one more pass, so the last write wins.
  const reload = coalesceReloads(readOnce);

  report(current);
  const watcher: FileWatch | undefined =
    options.watch === false
      ? undefined
      : watchFile({
          path,
          settleMs: HOSTS_RELOAD_SETTLE_MS,
          onChange: () => void reload(),
          onError: (err) => logger.error({ err, path }, 'hosts file watch failed; the current table stays until restart'),
        });
  return {
    table: Object.freeze({
      lookup: (name: string, family: 4 | 6) => current.lookup(name, family),
      get size() {
        return current.size;
      },
      get issues() {
        return current.issues;
      },
    }),
    subscribe(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    reload,
    close() {
      watcher?.close();
      listeners.clear();
    },
  };
}
