// The supervisor's serving TLS material kept in step with --tls-dir: reads and checks it at start, follows the folder
// (plain replacement and the kubelet's `..data` swap) and hands each new good version to `apply`, which swaps the
// listeners' secure context; a broken update keeps the material in use and is logged once per version.
// Never touches a socket: live sessions keep the context they were accepted with.

import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { SUPERVISOR_METRICS } from './metric-specs.js';
import { createGauge } from '../telemetry/metrics.js';
import { isBoundaryError, type Issue } from '../shared/errors.js';
import { type FileWatch, watchFiles } from '../shared/file-watch.js';
import { TLS_RELOAD_SETTLE_MS } from '../control/protocol.js';
import { checkServingIdentity, isWithinValidity, readControlIdentityPems, readIdentityUpdate, type ServingIdentity } from '../pki/identity.js';
import { ISSUED_FILES } from '../pki/issue.js';
import { DAY_MS } from '../pki/mint.js';
import { coalesceReloads } from '../shared/reload-queue.js';
import type { Logger } from '../telemetry/logger.js';

export interface ServingTlsSource {
  /** Reads and checks the folder once (PKI_INVALID listing every problem), then follows it. */
  start(): Promise<ServingIdentity>;
  close(): void;
  /** Re-reads now; resolves true when new material was applied. */
  reload(): Promise<boolean>;
  /** Undefined before start(). */
  current(): ServingIdentity | undefined;
  /** The serving certificate in use: notAfter (ISO 8601) and whole days left, negative once expired. Undefined before start(). */
  certificate(): ServingCertificateExpiry | undefined;
}

interface ServingCertificateExpiry {
  readonly notAfter: string;
  readonly daysLeft: number;
}

export const SERVING_CERT_EXPIRY_METRIC = SUPERVISOR_METRICS.boundary_supervisor_certificate_expiry_seconds.name;

/**
 * Registers `boundary_supervisor_certificate_expiry_seconds` on `registry`: the notAfter of the serving certificate in
 * use, as unix time in seconds, read from `source` at every scrape (so a renewal shows at once); 0 before start().
 */
export function registerServingCertificateExpiry(registry: Registry, source: Pick<ServingTlsSource, 'current'>): void {
  createGauge(registry, SUPERVISOR_METRICS.boundary_supervisor_certificate_expiry_seconds, {
    collect(gauge) {
      gauge.set({}, (source.current()?.notAfter ?? 0) / 1000);
    },
  });
}

export function createServingTlsSource(options: {
  readonly dir: string;
  readonly now: () => number;
  readonly logger: Logger;
  /** Takes new material into use on every listener; throwing refuses it like a failed check. */
  readonly apply: (identity: ServingIdentity) => void;
}): ServingTlsSource {
  const { dir, now, logger } = options;
  let loaded: ServingIdentity | undefined;
  let refusedHash: string | undefined;
  let watcher: FileWatch | undefined;

  function use(next: ServingIdentity, why: string): void {
    loaded = next;
    refusedHash = undefined;
    const notAfter = new Date(next.notAfter).toISOString();
    logger.info({ dir, identity: next, why }, `supervisor serving certificate loaded (${why}): ${next.subject || '(empty subject)'}, valid until ${notAfter}`);
  }

  function refuse(err: unknown, hash: string): void {
    // The kubelet and editors fire several events per version: say why a broken version is refused once.
    if (refusedHash === hash) return;
    refusedHash = hash;
    const issues: readonly Issue[] = isBoundaryError(err) ? err.issues : [];
    const message = err instanceof Error ? err.message : String(err);
    const keeping = loaded === undefined ? '' : `; keeping ${loaded.subject || 'the certificate'} valid until ${new Date(loaded.notAfter).toISOString()}`;
    logger.error({ dir, issues }, `supervisor TLS update refused: ${message}${keeping}`);
  }

  async function readOnce(): Promise<boolean> {
    const update = await readIdentityUpdate(dir, loaded?.hash);
    if (update.kind === 'unreadable') {
      refuse(update.error, update.hash);
      return false;
    }
    if (update.kind === 'unchanged') {
      // Back to what is in use (a broken update reverted): a later break of the same kind is news again.
      refusedHash = undefined;
      return false;
    }
    try {
      const next = checkServingIdentity(update.pems);
      const at = now();
      // An expired (or not yet valid) renewal would swap a working certificate for one every client refuses.
      if (loaded !== undefined && isWithinValidity(loaded, at) && !isWithinValidity(next, at)) {
        const window = `${new Date(next.notBefore).toISOString()} to ${new Date(next.notAfter).toISOString()}`;
        throw new Error(`${join(dir, ISSUED_FILES.cert)} is valid only from ${window}`);
      }
      options.apply(next);
      use(next, 'renewed');
      return true;
    } catch (err) {
      refuse(err, update.hash);
      return false;
    }
  }

  const reload = coalesceReloads(readOnce);

  return {
    async start() {
      if (loaded !== undefined) return loaded;
      const first = checkServingIdentity(await readControlIdentityPems(dir));
      use(first, 'start');
      watcher = watchFiles(
        Object.values(ISSUED_FILES).map((name) => join(dir, name)),
        {
          settleMs: TLS_RELOAD_SETTLE_MS,
          onChange: () => reload().catch((err: unknown) => logger.error({ err, dir }, 'supervisor TLS reload failed')),
          onError: (err) => logger.error({ err, dir }, 'supervisor TLS watch failed; a renewal of --tls-dir now needs a restart'),
        },
      );
      return first;
    },
    close() {
      watcher?.close();
      watcher = undefined;
    },
    reload,
    current: () => loaded,
    certificate() {
      if (loaded === undefined) return undefined;
      return { notAfter: new Date(loaded.notAfter).toISOString(), daysLeft: Math.floor((loaded.notAfter - now()) / DAY_MS) };
    },
  };
}
