// Recent denials per sandbox, from the OCSF events its boundaries forward over the control channel; served at
// GET /v1/sandboxes/<id>/denials. Copies closed fields only (never a message, detail or anything under a free key).
// Bounded in denials per sandbox and in sandboxes tracked.

import {
  createDenialRing,
  type DenialRecord,
  type DenialRing,
  denialText as text,
  MAX_DENIALS_PER_ANSWER,
} from '../telemetry/denials.js';
import { replayFromUnmapped } from '../telemetry/replay.js';

/** Denials kept per sandbox; the oldest goes first. */
export const MAX_DENIALS_PER_SANDBOX = 128;
/** Sandboxes with denials kept; the one that was denied longest ago goes first. */
export const MAX_DENIAL_SANDBOXES = 1_024;
/** Most denials one answer returns (`last` is capped to it): as the boundary's. */
export const MAX_SANDBOX_DENIALS_PER_ANSWER = MAX_DENIALS_PER_ANSWER;
/** OCSF DNS Activity, and action_id Denied. */
const DNS_ACTIVITY_CLASS_UID = 4003;
const ACTION_DENIED = 2;

/** A boundary's denial as the supervisor keeps it: the boundary's own record, and which instance sent it. */
export interface SandboxDenial extends DenialRecord {
  readonly instanceId: string;
}

export interface SandboxDenials {
  /** Records the denials among one events message's OCSF objects. */
  record(sandboxId: string, instanceId: string, events: readonly Readonly<Record<string, unknown>>[]): void;
  /** Newest first, at most MAX_SANDBOX_DENIALS_PER_ANSWER. */
  recent(sandboxId: string, n: number): readonly SandboxDenial[];
}

function objectAt(value: unknown, key: string): Record<string, unknown> | undefined {
  const inner = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
  return typeof inner === 'object' && inner !== null && !Array.isArray(inner) ? (inner as Record<string, unknown>) : undefined;
}

/** The denial an OCSF event records, or undefined: proxy decisions say `unmapped.verdict: deny`, DNS refusals action Denied. */
export function denialFromOcsf(event: Readonly<Record<string, unknown>>, instanceId: string, receivedAt: number): SandboxDenial | undefined {
  const u = objectAt(event, 'unmapped');
  if (u === undefined) return undefined;
  const dns = event.class_uid === DNS_ACTIVITY_CLASS_UID;
  if (dns ? event.action_id !== ACTION_DENIED : u.verdict !== 'deny') return undefined;
  const replay = replayFromUnmapped(u);
  const dst = objectAt(event, 'dst_endpoint');
  // The boundary's own time when the event has one; else when it arrived here.
  const time = new Date(typeof event.time === 'number' && Number.isFinite(event.time) ? event.time : receivedAt).toISOString();
  const generation = u.policy_generation;
  return {
    time,
    instanceId,
    adapter: dns ? 'dns' : (text(u.adapter) ?? 'unknown'),
    verdict: 'deny',
    reason: text(u.reason_code) ?? 'unknown',
    engine: null,
    policy: text(objectAt(event, 'firewall_rule')?.name),
    endpoint: text(u.endpoint),
    method: replay?.method ?? null,
    scheme: replay?.scheme ?? null,
    host: replay?.host ?? text(dst?.hostname) ?? text(dst?.domain) ?? text(dst?.ip),
    port: replay?.port ?? (typeof dst?.port === 'number' ? dst.port : null),
    path: replay?.path ?? null,
    queryKeys: replay?.query_keys ?? [],
    ...(dns && typeof u.qtype === 'string' ? { qtype: u.qtype } : {}),
    generation: typeof generation === 'number' ? generation : null,
    policyHash: text(u.policy_hash),
    ...(replay === undefined ? {} : { replay }),
  };
}

export function createSandboxDenials(now: () => number): SandboxDenials {
  // Map order is recency: a sandbox is moved to the end on each denial, and the first one is evicted.
  const rings = new Map<string, DenialRing<SandboxDenial>>();
  return {
    record(sandboxId, instanceId, events) {
      for (const event of events) {
        const denial = denialFromOcsf(event, instanceId, now());
        if (denial === undefined) continue;
        const ring = rings.get(sandboxId) ?? createDenialRing<SandboxDenial>(MAX_DENIALS_PER_SANDBOX);
        rings.delete(sandboxId);
        rings.set(sandboxId, ring);
        ring.record(denial);
        while (rings.size > MAX_DENIAL_SANDBOXES) {
          const oldest = rings.keys().next().value;
          if (oldest === undefined) break;
          rings.delete(oldest);
        }
      }
    },
    recent: (sandboxId, n) => rings.get(sandboxId)?.recent(n) ?? [],
  };
}
