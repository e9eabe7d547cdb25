// Per-session flood budgets for the HTTP/2 attack classes that cost the receiver more than the sender: PING and
// SETTINGS floods a peer reads the answers to, rapid reset (streams opened and cancelled at once), empty DATA frames
// (CVE-2019-9518) and streams that must be refused. Counters only, no clock: each budget is spent by the cheap frame
// and earned back by real requests (or, for resets, answers), so a busy client never runs out.

/** PING frames a client may send between two requests; beyond this the session is closed (ENHANCE_YOUR_CALM). */
export const H2_MAX_PINGS_BETWEEN_REQUESTS = 100;
/** SETTINGS frames a client may send between two requests. */
export const H2_MAX_SETTINGS_BETWEEN_REQUESTS = 100;
/**
 * Streams a client may cancel before their answer ended, less one per stream answered in full. Rapid reset
 * (CVE-2023-44487) opens and cancels streams as fast as it can; each one has cost a decision and maybe an upstream
 * stream. nghttp2's own limit (1000 at once, 33/s) is not settable from Node 20 and sits above this one.
 */
export const H2_MAX_RESET_DEBT = 200;

/** DATA frames without a payload or END_STREAM a client may send between two requests: they carry nothing. */
export const H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS = 100;
/** Streams boundary refused (malformed, or header lists past their limits) between two well-formed requests. */
export const H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS = 100;

export const FLOOD_KINDS = ['ping-flood', 'settings-flood', 'reset-flood', 'empty-frame-flood', 'rejected-stream-flood'] as const;
export type FloodKind = (typeof FLOOD_KINDS)[number];

export interface FloodGuard {
  /** Each returns the flood it detected, or undefined: then the frame is fine. */
  ping(): FloodKind | undefined;
  settings(): FloodKind | undefined;
  /** The client cancelled a stream before its answer ended. */
  reset(): FloodKind | undefined;
  /** A DATA frame with no payload and no END_STREAM. */
  empty(): FloodKind | undefined;
  /** A stream was refused before it became a request. */
  rejected(): FloodKind | undefined;
  /** A new request stream arrived. */
  request(): void;
  /** A stream's answer ended in full. */
  answered(): void;
}

export function createFloodGuard(): FloodGuard {
  let pings = 0;
  let settings = 0;
  let debt = 0;
  let empty = 0;
  let rejected = 0;
  return {
    ping() {
      pings++;
      return pings > H2_MAX_PINGS_BETWEEN_REQUESTS ? 'ping-flood' : undefined;
    },
    settings() {
      settings++;
      return settings > H2_MAX_SETTINGS_BETWEEN_REQUESTS ? 'settings-flood' : undefined;
    },
    reset() {
      debt++;
      return debt > H2_MAX_RESET_DEBT ? 'reset-flood' : undefined;
    },
    empty() {
      empty++;
      return empty > H2_MAX_EMPTY_FRAMES_BETWEEN_REQUESTS ? 'empty-frame-flood' : undefined;
    },
    rejected() {
      rejected++;
      return rejected > H2_MAX_REJECTED_STREAMS_BETWEEN_REQUESTS ? 'rejected-stream-flood' : undefined;
    },
    request() {
      pings = 0;
      settings = 0;
      empty = 0;
      rejected = 0;
    },
    answered() {
      if (debt > 0) debt--;
    },
  };
}
