// Watches one file that may be a Kubernetes ConfigMap/Secret projection (`name -> ..data/name`, where the
// kubelet publishes an update by renaming a new `..data` symlink into place, so `name` itself never appears
// in an event). Says "may have changed" after a settle window; never reads the file: callers compare a hash.

import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';

/** The kubelet's atomic writer names its internals `..data`, `..data_tmp` and `..<timestamp>`. */
const ATOMIC_WRITER_PREFIX = '..';

/** True for the kubelet's bookkeeping entries of a projected volume, which are never user files. */
export function isAtomicWriterEntry(name: string): boolean {
  return name.startsWith(ATOMIC_WRITER_PREFIX);
}

export interface FileWatch {
  close(): void;
}

interface FileWatchOptions {
  readonly path: string;
  /** A save (or a kubelet swap) is several events; one callback follows the last of them. */
  readonly settleMs: number;
  readonly onChange: () => void;
  /** The directory watch failed; no further callbacks come. */
  readonly onError: (err: Error) => void;
}

/** Watches the file's directory: editors replace a file by rename, and the kubelet swaps `..data`. */
export function watchFile(options: FileWatchOptions): FileWatch {
  const name = basename(options.path);
  let timer: NodeJS.Timeout | undefined;
  const watcher: FSWatcher = watch(dirname(options.path), (_event, filename) => {
    // null: the platform did not say which entry; assume ours.
    if (filename !== null && filename !== name && !isAtomicWriterEntry(filename)) return;
    clearTimeout(timer);
    timer = setTimeout(options.onChange, options.settleMs);
  });
  watcher.on('error', (err) => {
    clearTimeout(timer);
    options.onError(err);
  });
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}

/** One watchFile per path, closed together: a plain replacement may touch one file, a `..data` swap all of them. */
export function watchFiles(paths: readonly string[], options: Omit<FileWatchOptions, 'path'>): FileWatch {
  const watches = paths.map((path) => watchFile({ ...options, path }));
  return {
    close() {
      for (const watch of watches) watch.close();
    },
  };
}
