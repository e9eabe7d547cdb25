// Attached mode's client identity, kept in step with --tls-dir: watches the folder (plain replacement and the
// kubelet's `..data` swap), checks new material before the next dial uses it, keeps the last good material when an
// update is broken, and re-reads after the supervisor rejected us. Never dials and never ends a live session.

import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { isBoundaryError, type Issue } from '../shared/errors.js';
import { type FileWatch, watchFiles } from '../shared/file-watch.js';
import {
  checkControlIdentity,
  type ControlIdentity,
  type ControlIdentityPems,
  isWithinValidity,
  readControlIdentityPems,
  readIdentityUpdate,
} from '../pki/identity.js';
import { ISSUED_FILES } from '../pki/issue.js';
import { DAY_MS } from '../pki/mint.js';
import { coalesceReloads } from '../shared/reload-queue.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import { CONTROL_METRICS } from './metric-specs.js';
import { createGauge, plainGauge } from '../telemetry/metrics.js';
import { type ControlDialTls, ControlFailure, type ControlTlsProvider, createControlContext } from './dial.js';
import { CERT_EXPIRY_WARNING_DAYS, TLS_RELOAD_SETTLE_MS } from './protocol.js';

const CERT_EXPIRY_WARNING_MS = CERT_EXPIRY_WARNING_DAYS * DAY_MS;
/** The /readyz reason once the client certificate in use has expired. */
export const CERT_EXPIRED_REASON = 'control-certificate-expired';
/** Prefix of the /readyz warning inside the warning window. */
export const CERT_EXPIRING_WARNING = 'control-certificate-expiring';

const CERT_STATES = ['valid', 'expiring', 'expired'] as const;
type CertState = (typeof CERT_STATES)[number];

/** What /readyz shows about the client certificate in use. */
export interface ControlCertificateStatus {
  readonly spiffeId: string;
  readonly fingerprint256: string;
  /** ISO 8601. */
  readonly notAfter: string;
  /** Whole days until notAfter; negative once expired. */
  readonly daysLeft: number;
  readonly state: CertState;
  /** The last update that was refused (the material above stayed in use), until a good one arrives. */
  readonly lastRefused?: { readonly at: string; readonly message: string };
}

export interface ControlTlsSource {
  /** Reads and checks the folder once (PKI_INVALID listing every problem), then follows it. */
  start(): Promise<void>;
  close(): void;
  /** Re-reads now; resolves true when new material was taken into use. */
  reload(): Promise<boolean>;
  /** For createControlClient's `tls`. */
  readonly provide: ControlTlsProvider;
  /** Undefined before start(). */
  status(): ControlCertificateStatus | undefined;
}

interface Loaded {
  readonly identity: ControlIdentity;
  readonly dial: ControlDialTls;
}

export function createControlTlsSource(options: {
  readonly dir: string;
  readonly sandboxId: string;
  readonly now: () => number;
  readonly logger: Logger;
  readonly sink: AuditSink;
  readonly registry: Registry;
}): ControlTlsSource {
  const { dir, now, logger, sink } = options;
  const certPath = join(dir, ISSUED_FILES.cert);
  const expiry = plainGauge(createGauge(options.registry, CONTROL_METRICS.boundary_control_certificate_expiry_seconds));
  let loaded: Loaded | undefined;
  let refused: { hash: string; at: number; message: string } | undefined;
  let watcher: FileWatch | undefined;

  function build(pems: ControlIdentityPems): Loaded {
    const identity = checkControlIdentity(pems, { sandboxId: options.sandboxId });
    const tls = { caPem: identity.caPem, certPem: identity.certPem, keyPem: identity.keyPem };
    return { identity, dial: { tls, secureContext: createControlContext(tls) } };
  }

  function use(next: Loaded, why: string): void {
    loaded = next;
    refused = undefined;
    expiry.set(next.identity.notAfter / 1000);
    const notAfter = new Date(next.identity.notAfter).toISOString();
    logger.info({ dir, identity: next.identity, why }, `control client certificate loaded (${why}), valid until ${notAfter}`);
    sink.emit({
      class: 'CONFIG',
      activity: 'LOADED',
      severity: 'INFO',
      engine: 'control',
      message: `control client certificate ${next.identity.spiffeId} loaded from ${dir}, valid until ${notAfter}`,
      unmapped: { source: dir, notAfter, fingerprint256: next.identity.fingerprint256 },
    });
  }

  function refuse(err: unknown, rawHash: string): void {
    // After a tls-auth failure every retry re-reads: report one broken version once, not once per retry.
    if (refused?.hash === rawHash) return;
    const issues: readonly Issue[] = isBoundaryError(err) ? err.issues : [];
    const message = err instanceof Error ? err.message : String(err);
    refused = { hash: rawHash, at: now(), message };
    const keeping = loaded === undefined ? '' : `; keeping the certificate valid until ${new Date(loaded.identity.notAfter).toISOString()}`;
    logger.error({ dir, issues }, `control TLS update refused: ${message}${keeping}`);
    sink.emit({
      class: 'CONFIG',
      activity: 'FAILED',
      severity: 'MED',
      engine: 'control',
      message: `control TLS update in ${dir} refused${keeping}`,
      detail: message,
      unmapped: { source: dir, issues: issues.length },
    });
  }

  async function readOnce(): Promise<boolean> {
    const update = await readIdentityUpdate(dir, loaded?.identity.hash);
    if (update.kind === 'unreadable') {
      refuse(update.error, update.hash);
      return false;
    }
    if (update.kind === 'unchanged') {
      // Back to what is in use (a broken update reverted): nothing refused any more.
      refused = undefined;
      return false;
    }
    const { hash } = update;
    let next: Loaded;
    try {
      next = build(update.pems);
    } catch (err) {
      refuse(err, hash);
      return false;
    }
    const at = now();
    // A renewal that is already expired (or not yet valid) would only swap a working certificate for a failing one.
    if (loaded !== undefined && isWithinValidity(loaded.identity, at) && !isWithinValidity(next.identity, at)) {
      const window = `${new Date(next.identity.notBefore).toISOString()} to ${new Date(next.identity.notAfter).toISOString()}`;
      refuse(new Error(`${certPath} is valid only from ${window}`), hash);
      return false;
    }
    use(next, 'renewed');
    return true;
  }

  const reload = coalesceReloads(readOnce);

  async function provide(context: Parameters<ControlTlsProvider>[0]): Promise<ControlDialTls> {
    // The supervisor rejected us: the Secret may have been renewed since the watcher last said so.
    if (context.lastFailure === 'tls-auth') await reload();
    if (loaded === undefined) throw new ControlFailure('tls-auth', `no control TLS material loaded from ${dir}`);
    const { identity } = loaded;
    if (now() >= identity.notAfter) {
      throw new ControlFailure(
        'tls-auth',
        `client certificate expired at ${new Date(identity.notAfter).toISOString()} (${certPath}); not dialling until it is renewed (the folder is watched and re-read before every retry)`,
      );
    }
    return loaded.dial;
  }

  function watch(): void {
    watcher = watchFiles(
      Object.values(ISSUED_FILES).map((name) => join(dir, name)),
      {
        settleMs: TLS_RELOAD_SETTLE_MS,
        onChange: () => reload().catch((err: unknown) => logger.error({ err, dir }, 'control TLS reload failed')),
        onError: (err) => logger.error({ err, dir }, 'control TLS watch failed; renewals are picked up only after a tls-auth failure'),
      },
    );
  }

  return {
    async start() {
      if (loaded !== undefined) return;
      use(build(await readControlIdentityPems(dir)), 'start');
      watch();
    },
    close() {
      watcher?.close();
      watcher = undefined;
    },
    reload,
    provide,
    status() {
      if (loaded === undefined) return undefined;
      const { identity } = loaded;
      const left = identity.notAfter - now();
      const state: CertState = left <= 0 ? 'expired' : left <= CERT_EXPIRY_WARNING_MS ? 'expiring' : 'valid';
      return {
        spiffeId: identity.spiffeId,
        fingerprint256: identity.fingerprint256,
        notAfter: new Date(identity.notAfter).toISOString(),
        daysLeft: Math.floor(left / DAY_MS),
        state,
        ...(refused === undefined ? {} : { lastRefused: { at: new Date(refused.at).toISOString(), message: refused.message } }),
      };
    },
  };
}
