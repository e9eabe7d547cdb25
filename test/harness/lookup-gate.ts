// A lookup gate for tests that build policy DNS or a destination check by hand: `resolver` behind it, and its
// reports written to `sink` as the boundary writes them (dns/lookup-events.ts), stamped with `policy`.

import { lookupReportEvent } from '../../src/dns/lookup-events.js';
import { createLookupGate, type LookupGate } from '../../src/net/lookup-gate.js';
import type { Resolver } from '../../src/net/resolver.js';
import type { BucketLimits } from '../../src/net/token-bucket.js';
import type { TunnelDetectionMode } from '../../src/net/tunnel-detect.js';
import type { Policy } from '../../src/policy/types.js';
import type { AuditSink } from '../../src/telemetry/event.js';

/** New-name limits no test flood reaches: for tests about something else. */
export const UNLIMITED_NEW_NAMES: BucketLimits = { perSecond: 1e9, burst: 1e9 };

export function testLookupGate(
  resolver: Resolver,
  options: {
    readonly now?: () => number;
    readonly sink?: AuditSink;
    readonly policy?: () => Pick<Policy, 'generation' | 'hash'>;
    readonly tunnelDetection?: TunnelDetectionMode;
    readonly newNames?: BucketLimits;
  } = {},
): LookupGate {
  const policy = options.policy ?? (() => ({ generation: 0, hash: '' }));
  return createLookupGate({
    resolver,
    now: options.now ?? Date.now,
    report: (report) => options.sink?.emit(lookupReportEvent(report, policy())),
    ...(options.tunnelDetection === undefined ? {} : { tunnelDetection: options.tunnelDetection }),
    ...(options.newNames === undefined ? {} : { newNames: options.newNames }),
  });
}
