// The IdentitySource contract (docs/identity.md#how-a-connection-maps-to-a-process): an accepted TCP connection's
// two addresses in, the process that owns the client end out, or a coded failure. Types and the closed sets
// only; proc-source.ts reads /proc itself, socket-source.ts asks `boundary identity serve`.

import type { Distrusted, IdentityFailure } from '../policy/binary-identity.js';

/** What `--binary-identity` may say: binaries enforced (the default), or the operator's endpoint-only choice. */
export const BINARY_IDENTITY_MODES = ['required', 'endpoint-only'] as const;
export type BinaryIdentityMode = (typeof BINARY_IDENTITY_MODES)[number];

/** A lookup never takes longer than this; the connection is then decided as `timeout` (fail closed). */
export const IDENTITY_LOOKUP_TIMEOUT_MS = 2_000;
/** Lookups waiting at once; more are answered `overloaded` at once rather than queued without bound. */
export const MAX_PENDING_LOOKUPS = 1_024;
/** A path longer than this is neither resolved nor reported (PATH_MAX is 4096; policy paths are far shorter). */
export const MAX_IDENTITY_PATH_BYTES = 1_024;

export interface SocketEnd {
  /** An IP literal as node reports it (`::ffff:127.0.0.1` is IPv4-mapped and compared as 127.0.0.1). */
  readonly ip: string;
  readonly port: number;
}

/** The workload's socket of a connection looked up before: fixed for as long as boundary holds its own end. */
export interface SocketRef {
  readonly inode: number;
  /** The uid that created it: its processes are searched for holders first (proc-owners.ts). */
  readonly uid: number;
}

export interface LookupRequest {
  /** The workload's end: the accepted socket's remote address. */
  readonly client: SocketEnd;
  /** The proxy's end: the accepted socket's local address (a synthetic address for transparent capture). */
  readonly proxy: SocketEnd;
  /**
   * Non-glob policy paths to resolve through the owner's file system (docs/identity.md#symlinks); an executable one
   * of them (or its resolved form) names is verified (docs/identity.md#verification).
   */
  readonly paths: readonly string[];
  /** Glob policy paths: an executable that could match one (its literal prefix) is verified too. */
  readonly globs?: readonly string[];
  /** A re-check of a connection looked up before (docs/identity.md#kept-alive-connections): the socket tables are not read. */
  readonly socket?: SocketRef;
}

export interface ProcessIdentity {
  readonly pid: number;
  /** readlink /proc/<pid>/exe, with one ` (deleted)` taken off when the file is gone (docs/identity.md#deleted-executables). */
  readonly exe: string;
  /** The parent's executable, its parent's, ... up to MAX_ANCESTOR_DEPTH, unreadable ones left out. */
  readonly ancestors: readonly string[];
  /** The owner's argv entries that look like absolute paths; never matched by policy. */
  readonly cmdlinePaths: readonly string[];
  /** Each requested path whose resolution in the owner's root differs from it, as [path, resolved]. */
  readonly resolved: readonly (readonly [string, string])[];
  /** The executable and ancestors that passed verification: only these may grant (docs/identity.md#verification). */
  readonly verified: readonly string[];
  /** Executables whose verification failed, with the failure; each grants nothing. */
  readonly distrusted: readonly Distrusted[];
}

export type IdentityResult =
  | {
      readonly ok: true;
      /** The holder with the lowest pid. */
      readonly identity: ProcessIdentity;
      /** The other holders policy could judge differently (docs/identity.md#shared-sockets); forks alike are one. */
      readonly holders: readonly ProcessIdentity[];
      readonly socket: SocketRef;
    }
  | { readonly ok: false; readonly failure: IdentityFailure; readonly detail: string };

export interface IdentitySource {
  /** Never rejects: a failure is a value with a coded reason, so the caller fails closed with it. */
  lookup(request: LookupRequest): Promise<IdentityResult>;
  /** Why lookups cannot succeed right now (for /readyz), or undefined. */
  problem(): string | undefined;
  start(): Promise<void>;
  /** Idempotent; pending lookups are answered `source-unavailable`. */
  close(): Promise<void>;
}

export function failed(failure: IdentityFailure, detail: string): Extract<IdentityResult, { ok: false }> {
  return { ok: false, failure, detail };
}
