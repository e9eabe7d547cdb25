// Binary identity as policy sees it (docs/identity.md): the claim an adapter puts into an EgressIntent about the
// process that opened a connection, and how decide() narrows the matching endpoints by it. Pure: src/identity/
// finds the process; this file compares paths and never reads one.

import type { Endpoint, Policy } from './types.js';

/** Why no process identity is available: a closed set, rendered in events and docs/identity.md#failure-reasons. */
export const IDENTITY_FAILURES = [
  // The process table (or the identity server's view of it) cannot be read at all.
  'proc-unavailable',
  // No ESTABLISHED socket with this (client, proxy) address pair: another network namespace, or already closed.
  'socket-not-found',
  // The socket exists but no visible process holds it: the processes live in another PID namespace.
  'owner-not-found',
  // Processes of another uid could not be inspected: CAP_SYS_PTRACE or CAP_DAC_READ_SEARCH is missing.
  'permission-denied',
  // The owner went away before its executable was read.
  'owner-exited',
  // More processes hold the socket than a lookup reads (MAX_SOCKET_HOLDERS).
  'ambiguous-owner',
  // The identity server cannot be reached, or answered something it should not have.
  'source-unavailable',
  'timeout',
  'overloaded',
  // Nothing was looked up when the connection opened, because no endpoint it could reach needed it then.
  'not-looked-up',
  // The executable's content differs from the one pinned for its path on first use (docs/identity.md#pinning).
  'executable-changed',
  // The running file is not the file at its path as a trusted view of the file system shows it: a bind mount in a
  // private mount namespace, a file replaced and never pinned, one too large to hash.
  'executable-unverified',
  // Every pin slot is taken (MAX_PINNED_PATHS): a path not pinned yet cannot be verified.
  'pin-table-full',
  // LD_PRELOAD, LD_LIBRARY_PATH or LD_AUDIT in the process's environment: the loader may run code from anywhere.
  'loader-injection',
  // An executable mapping from a file the workload can write, or from no file at all (deleted, memfd).
  'writable-code',
] as const;
export type IdentityFailure = (typeof IDENTITY_FAILURES)[number];

/** Failures that say the process runs code other than its executable's path claims: each raises a finding. */
export const TAMPER_FAILURES = ['executable-changed', 'executable-unverified', 'loader-injection', 'writable-code'] as const satisfies readonly IdentityFailure[];

/** An executable (the process's own or an ancestor's) whose verification failed: it grants nothing. */
export interface Distrusted {
  readonly path: string;
  readonly failure: IdentityFailure;
}

/**
 * Which identity a decision was made with: the process's, none because the endpoints it matched admit any
 * binary, none because the operator chose endpoint-only (or nothing asked, as in `policy explain` without
 * --binary), or none because it could not be established.
 */
export const BINARY_IDENTITIES = ['process', 'not-needed', 'endpoint-only', 'unavailable'] as const;
export type BinaryIdentity = (typeof BINARY_IDENTITIES)[number];

export interface ProcessClaim {
  readonly kind: 'process';
  /** Shown in events; never matched. */
  readonly pid?: number;
  /** The kernel's canonical path of the executable (an interpreter for a script). */
  readonly exe: string;
  /** Executables of the parent, its parent, ... (nearest first). */
  readonly ancestors: readonly string[];
  /** Absolute paths in the owner's and its ancestors' argv: shown in denials (a script's path), never matched. */
  readonly cmdlinePaths?: readonly string[];
  /** Non-glob policy paths as the process's own file system resolves them (symlinks followed), where that differs. */
  readonly resolved?: ReadonlyMap<string, string>;
  /**
   * The executable and ancestors that passed verification (docs/identity.md#verification): when present, only these
   * may grant. Absent for a claim no identity source made (explain's `--binary`).
   */
  readonly verified?: ReadonlySet<string>;
  /** Executables whose verification failed, so that a denial names the path a policy would have matched. */
  readonly distrusted?: readonly Distrusted[];
  /** The other processes holding the same socket, each judged too (docs/identity.md#shared-sockets). */
  readonly holders?: readonly ProcessClaim[];
}

export interface UnavailableClaim {
  readonly kind: 'unavailable';
  readonly failure: IdentityFailure;
  /** One sentence on why; never a secret (paths and pids at most). */
  readonly detail?: string;
}

/** What an adapter knows about who opened a connection. No claim at all means binaries are not checked. */
export type IdentityClaim = ProcessClaim | UnavailableClaim;

/** The claim of a connection for which nothing needed a lookup when it opened. */
export const NOT_LOOKED_UP: UnavailableClaim = Object.freeze({ kind: 'unavailable', failure: 'not-looked-up' });

/** `/**`: any executable. An entry that lists it needs no identity. */
export const ANY_BINARY = '/**';
/** Ancestors and argv paths named in a denial's detail; the rest are left out. */
const MAX_SHOWN_ANCESTORS = 6;
/** Non-glob paths handed to the identity source for symlink resolution per lookup (docs/identity.md#symlinks). */
export const MAX_RESOLVED_PATHS = 64;

/** What an entry's binaries list asks of a connection: nothing, an impossible match, or the process's identity. */
function binaryNeed(binaries: readonly string[]): 'any' | 'none' | 'identity' {
  if (binaries.includes(ANY_BINARY)) return 'any';
  return binaries.length === 0 ? 'none' : 'identity';
}

/** A binaries entry without `*` is compared as a string, so it is the one kind worth resolving through symlinks. */
export function isExactBinary(path: string): boolean {
  return !path.includes('*');
}

const policyNeeds = new WeakMap<Policy, boolean>();

/** Whether any entry of the policy needs a process identity (cached per compiled policy). */
export function policyNeedsIdentity(policy: Policy): boolean {
  let needs = policyNeeds.get(policy);
  if (needs === undefined) {
    needs = policy.entries.some((entry) => binaryNeed(entry.binaries) === 'identity');
    policyNeeds.set(policy, needs);
  }
  return needs;
}

/** The endpoints a connection to host:port may be decided by. */
function endpointsAt(policy: Policy, host: string, port: number): readonly Endpoint[] {
  return policy.endpointsForHost(host).filter((e) => e.ports.includes(port));
}

/** Whether a connection to host:port needs a lookup: some endpoint there belongs to an entry that needs identity. */
export function identityNeededAt(policy: Policy, host: string, port: number): boolean {
  return policyNeedsIdentity(policy) && endpointsAt(policy, host, port).some((e) => binaryNeed(e.binaries) === 'identity');
}

const policyPatterns = new WeakMap<Policy, BinaryPatterns>();

/** What a lookup hands the identity source of the policy's binaries (docs/identity.md#verification). */
export interface BinaryPatterns {
  /** Non-glob paths: resolved through symlinks, and the executables they name verified. */
  readonly paths: readonly string[];
  /** Globs: an executable one could match is verified (by its literal prefix, so never too few). */
  readonly globs: readonly string[];
}

/** The binaries of the endpoints at host:port (or of the whole policy), deduplicated and bounded. */
export function binaryPatterns(policy: Policy, at?: { readonly host: string; readonly port: number }): BinaryPatterns {
  if (at !== undefined) return patternsOf(endpointsAt(policy, at.host, at.port).map((e) => e.binaries));
  let patterns = policyPatterns.get(policy);
  if (patterns === undefined) {
    patterns = patternsOf(policy.entries.map((e) => e.binaries));
    policyPatterns.set(policy, patterns);
  }
  return patterns;
}

/** The non-glob binaries worth resolving for host:port (or the whole policy), at most MAX_RESOLVED_PATHS. */
export function pathsToResolve(policy: Policy, at?: { readonly host: string; readonly port: number }): readonly string[] {
  return binaryPatterns(policy, at).paths;
}

function patternsOf(lists: readonly (readonly string[])[]): BinaryPatterns {
  const paths = new Set<string>();
  const globs = new Set<string>();
  let over = false;
  for (const list of lists) {
    for (const path of list) {
      if (path === ANY_BINARY) continue;
      const into = isExactBinary(path) ? paths : globs;
      if (into.size < MAX_RESOLVED_PATHS) into.add(path);
      else over = true;
    }
  }
  // More than a lookup carries: every executable is verified rather than one a dropped pattern names left out.
  return { paths: [...paths], globs: over ? [ANY_BINARY] : [...globs] };
}

/** The endpoints a claim leaves standing, the label the decision carries, and what matched. */
export interface BinaryNarrowing {
  readonly endpoints: readonly Endpoint[];
  readonly identity: BinaryIdentity;
  readonly failure: IdentityFailure | undefined;
  /** Per kept endpoint, the ancestor whose path matched when the executable's own did not. */
  readonly via: ReadonlyMap<Endpoint, string> | undefined;
  /** Set when the claim removed every endpoint only because none could be judged without an identity. */
  readonly unavailable: boolean;
  /** The process the decision names: of several holding the socket, the one allowed least (docs/identity.md#shared-sockets). */
  readonly subject: ProcessClaim | undefined;
}

/**
 * Narrows endpoints by the claim (docs/identity.md#matching): no claim keeps all (endpoint-only); `/**` entries
 * stay whatever the claim; a process keeps the entries where its executable, an ancestor or a resolved alias of
 * a non-glob path matches, among those verified, and only those every process holding the socket keeps; without an
 * identity the entries that need one go.
 */
export function narrowByBinary(endpoints: readonly Endpoint[], claim: IdentityClaim | undefined): BinaryNarrowing {
  if (claim === undefined) return { endpoints, identity: 'endpoint-only', failure: undefined, via: undefined, unavailable: false, subject: undefined };
  if (claim.kind === 'unavailable') {
    const kept = endpoints.filter((e) => binaryNeed(e.binaries) === 'any');
    const mattered = endpoints.some((e) => binaryNeed(e.binaries) === 'identity');
    return {
      endpoints: kept,
      identity: mattered ? 'unavailable' : 'not-needed',
      failure: mattered ? claim.failure : undefined,
      via: undefined,
      unavailable: mattered && kept.length === 0,
      subject: undefined,
    };
  }
  let subject = claim;
  let narrowest = narrowOne(endpoints, claim);
  let kept = narrowest.kept;
  for (const holder of claim.holders ?? []) {
    const own = narrowOne(endpoints, holder);
    kept = kept.filter((e) => own.kept.includes(e));
    if (own.kept.length < narrowest.kept.length) {
      subject = holder;
      narrowest = own;
    }
  }
  const via = new Map([...narrowest.via].filter(([e]) => kept.includes(e)));
  return { endpoints: kept, identity: 'process', failure: undefined, via: via.size === 0 ? undefined : via, unavailable: false, subject };
}

/** The endpoints one process may use, and per endpoint the ancestor that matched. */
function narrowOne(endpoints: readonly Endpoint[], claim: ProcessClaim): { kept: Endpoint[]; via: Map<Endpoint, string> } {
  const candidates = [claim.exe, ...claim.ancestors].filter((path) => claim.verified === undefined || claim.verified.has(path));
  const kept: Endpoint[] = [];
  const via = new Map<Endpoint, string>();
  for (const endpoint of endpoints) {
    const need = binaryNeed(endpoint.binaries);
    if (need === 'none') continue;
    const matched = need === 'any' ? claim.exe : matchingPath(endpoint, candidates, claim.resolved);
    if (matched === undefined) continue;
    kept.push(endpoint);
    if (matched !== claim.exe) via.set(endpoint, matched);
  }
  return { kept, via };
}

/** The first of exe and ancestors that the endpoint's binaries match, directly or through a resolved symlink. */
function matchingPath(endpoint: Endpoint, candidates: readonly string[], resolved: ReadonlyMap<string, string> | undefined): string | undefined {
  for (const candidate of candidates) {
    if (endpoint.matchesBinary(candidate)) return candidate;
    if (resolved === undefined) continue;
    for (const path of endpoint.binaries) if (resolved.get(path) === candidate) return candidate;
  }
  return undefined;
}

/** The distrusted executable of `claim` that an endpoint would have matched: why it was refused, not just that. */
export function distrustedMatch(endpoints: readonly Endpoint[], claim: ProcessClaim): Distrusted | undefined {
  for (const distrusted of claim.distrusted ?? []) {
    if (endpoints.some((e) => binaryNeed(e.binaries) === 'identity' && matchingPath(e, [distrusted.path], claim.resolved) !== undefined)) return distrusted;
  }
  return undefined;
}

/** What a denial adds after the verdict: the ancestors and argv paths, so a script or a launcher is visible. */
export function processContext(claim: ProcessClaim): string {
  const ancestors = claim.ancestors.length === 0 ? '' : `; ancestors: ${claim.ancestors.slice(0, MAX_SHOWN_ANCESTORS).join(' -> ')}`;
  const cmdline = claim.cmdlinePaths ?? [];
  // A script is its interpreter to the kernel: name the script so the reader sees why its path did not match.
  const script = cmdline.length === 0 ? '' : `; command line: ${cmdline.slice(0, MAX_SHOWN_ANCESTORS).join(', ')} (a script runs as its interpreter)`;
  return `${ancestors}${script}`;
}
