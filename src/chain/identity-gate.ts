// The chain's side of binary identity (docs/identity.md#when-a-process-is-looked-up): which claim each adapter puts
// into its intent. A process is looked up only where an endpoint the connection may reach lists binaries other than
// `/**`: when a tunnel or capture opens, and again for each request on a kept-alive connection, so a request is
// decided by whoever holds the connection when it arrives. Each result becomes the claim decide() reads plus the
// fields of the decision event. Makes no verdict.

import type { Socket } from 'node:net';
import {
  binaryPatterns,
  type IdentityClaim,
  identityNeededAt,
  NOT_LOOKED_UP,
  policyNeedsIdentity,
  type ProcessClaim,
  TAMPER_FAILURES,
} from '../policy/binary-identity.js';
import type { Decision, Policy } from '../policy/types.js';
import type { BinaryIdentityMode, IdentityResult, IdentitySource, ProcessIdentity, SocketRef } from '../identity/source.js';
import type { TunnelTarget } from '../proxy/context.js';

export interface IdentityGate {
  /** CONNECT and transparent capture: the claim of a connection to host:port; undefined in endpoint-only mode. */
  forDestination(socket: Socket, policy: Policy, host: string, port: number): Promise<IdentityClaim | undefined>;
  /**
   * A request on a kept-alive connection, forward or inside a tunnel (docs/identity.md#kept-alive-connections): a
   * lookup to wait for when an endpoint at host:port needs the process, else undefined (go on now). Each such
   * request is decided by the processes holding the connection when it arrived.
   */
  beforeRequest(socket: Socket, policy: Policy, host: string, port: number): Promise<void> | undefined;
  /** Whether any request under this policy may need a lookup: false in endpoint-only mode or without such entries. */
  watches(policy: Policy): boolean;
  /** The newest claim made for the connection, or undefined when none was (endpoint-only, or none needed yet). */
  latest(socket: Socket): IdentityClaim | undefined;
  /** Forward requests: the connection's claim; NOT_LOOKED_UP when nothing was looked up, undefined in endpoint-only mode. */
  settled(socket: Socket): IdentityClaim | undefined;
  /** Why identities cannot be established while the policy needs them (/readyz), or undefined. */
  problem(policy: Policy): string | undefined;
}

/** The claim one holder makes: only what verification passed may grant. */
function processClaim(identity: ProcessIdentity): ProcessClaim {
  const { pid, exe, ancestors, cmdlinePaths, resolved, verified, distrusted } = identity;
  return { kind: 'process', pid, exe, ancestors, cmdlinePaths, resolved: new Map(resolved), verified: new Set(verified), distrusted };
}

/** The claim a lookup result makes: every holder of the connection, the lowest pid first. */
function claimOf(result: IdentityResult): IdentityClaim {
  if (!result.ok) return { kind: 'unavailable', failure: result.failure, detail: result.detail };
  const claim = processClaim(result.identity);
  return result.holders.length === 0 ? claim : { ...claim, holders: result.holders.map(processClaim) };
}

/** What the gate remembers of a connection: its newest claim, the socket a re-check names, and lookup order. */
interface Known {
  claim?: IdentityClaim;
  socket?: SocketRef;
  /** Lookups started, and the number of the one whose answer `claim` is: an older answer never replaces a newer. */
  started: number;
  answered: number;
}

export function createIdentityGate(options: { readonly mode: BinaryIdentityMode; readonly source?: IdentitySource | undefined }): IdentityGate {
  const { mode, source } = options;
  const known = new WeakMap<Socket, Known>();

  /** Looks up who holds the connection now, with the socket found before when there is one, and records the answer. */
  function lookup(socket: Socket, policy: Policy, host: string, port: number): Promise<IdentityClaim> {
    let entry = known.get(socket);
    if (entry === undefined) {
      entry = { started: 0, answered: 0 };
      known.set(socket, entry);
    }
    const mine = ++entry.started;
    const record = entry;
    return ask(socket, policy, host, port, record.socket).then((result) => {
      const claim = claimOf(result);
      if (mine > record.answered) {
        record.answered = mine;
        record.claim = claim;
        if (result.ok) record.socket = result.socket;
      }
      return claim;
    });
  }

  /** Both ends of an accepted connection and the policy's binaries there, as the identity source asks for them. */
  function ask(socket: Socket, policy: Policy, host: string, port: number, ref: SocketRef | undefined): Promise<IdentityResult> {
    if (source === undefined) return Promise.resolve({ ok: false, failure: 'source-unavailable', detail: 'no identity source is configured' });
    const { remoteAddress, remotePort, localAddress, localPort } = socket;
    if (remoteAddress === undefined || remotePort === undefined || localAddress === undefined || localPort === undefined) {
      return Promise.resolve({ ok: false, failure: 'socket-not-found', detail: 'the client connection closed before it was looked up' });
    }
    const { paths, globs } = binaryPatterns(policy, { host, port });
    const request = { client: { ip: remoteAddress, port: remotePort }, proxy: { ip: localAddress, port: localPort }, paths, globs };
    return source.lookup(ref === undefined ? request : { ...request, socket: ref });
  }

  return {
    async forDestination(socket, policy, host, port) {
      if (mode === 'endpoint-only') return undefined;
      if (!identityNeededAt(policy, host, port)) return NOT_LOOKED_UP;
      return lookup(socket, policy, host, port);
    },
    beforeRequest(socket, policy, host, port) {
      if (mode === 'endpoint-only' || !identityNeededAt(policy, host, port)) return undefined;
      return lookup(socket, policy, host, port).then(() => undefined);
    },
    watches(policy) {
      return mode !== 'endpoint-only' && policyNeedsIdentity(policy);
    },
    latest(socket) {
      return known.get(socket)?.claim;
    },
    settled(socket) {
      if (mode === 'endpoint-only') return undefined;
      return known.get(socket)?.claim ?? NOT_LOOKED_UP;
    },
    problem(policy) {
      if (mode === 'endpoint-only' || !policyNeedsIdentity(policy)) return undefined;
      if (source === undefined) return 'identity-unavailable: no identity source is configured';
      const problem = source.problem();
      return problem === undefined ? undefined : `identity-unavailable: ${problem}`;
    },
  };
}

/** The claim of a request's connection: its newest (re-checked) claim, the tunnel's, or the forward connection's. */
export function requestIdentity(gate: IdentityGate | undefined, socket: Socket | undefined, scope: TunnelTarget | undefined): IdentityClaim | undefined {
  if (scope !== undefined) return (scope.socket === undefined ? undefined : gate?.latest(scope.socket)) ?? scope.identity;
  // Every request outside a tunnel arrives on its own connection; one without is decided as unidentifiable.
  if (socket === undefined) return gate === undefined ? undefined : { kind: 'unavailable', failure: 'socket-not-found', detail: 'the request has no client connection' };
  return gate?.settled(socket);
}

/** The finding a denial raises when the process may run code other than its path names (docs/identity.md#findings). */
export function identityFinding(decision: Decision): string | undefined {
  const failure = decision.identityFailure;
  return decision.verdict === 'deny' && (TAMPER_FAILURES as readonly string[]).includes(failure ?? '') ? failure : undefined;
}

/** What the decision event says of the identity it was made with (docs/events.md#identity-fields). */
export function identityFields(decision: Decision, claim: IdentityClaim | undefined): Record<string, unknown> {
  return addIdentityFields({}, decision, claim);
}

/** identityFields written into `fields` (an event's extra fields, built once per request), in the same order. */
export function addIdentityFields(fields: Record<string, unknown>, decision: Decision, claim: IdentityClaim | undefined): Record<string, unknown> {
  fields.identity = decision.binaryIdentity;
  if (decision.binary !== undefined) {
    // The process the decision names: of several holding the connection, the one refused.
    fields.binary = decision.binary;
    if (decision.binaryPid !== undefined) fields.binary_pid = decision.binaryPid;
    if (decision.binaryAncestor !== undefined) fields.binary_ancestor = decision.binaryAncestor;
  }
  if (claim?.kind === 'process' && claim.holders !== undefined) fields.binary_holders = [claim, ...claim.holders].map((h) => h.pid);
  if (decision.identityFailure !== undefined) fields.identity_failure = decision.identityFailure;
  return fields;
}
