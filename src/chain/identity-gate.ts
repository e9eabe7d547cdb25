// The proxy's side of binary identity (docs/identity.md#when-a-process-is-looked-up): which claim each adapter puts
// into its intent. A process is looked up only when the policy needs it (an endpoint the connection may reach, or
// for forward requests any entry, lists binaries other than `/**`), once per connection, and the result becomes
// the claim decide() reads plus the fields of the decision event. Makes no verdict.

import type { Socket } from 'node:net';
import {
  type IdentityClaim,
  identityNeededAt,
  NOT_LOOKED_UP,
  pathsToResolve,
  policyNeedsIdentity,
  type ProcessClaim,
} from '../policy/binary-identity.js';
import type { Decision, Policy } from '../policy/types.js';
import type { BinaryIdentityMode, IdentityResult, IdentitySource } from '../identity/source.js';
import type { TunnelTarget } from '../proxy/context.js';

export interface IdentityGate {
  /** CONNECT and transparent capture: the claim of a connection to host:port; undefined in endpoint-only mode. */
  forDestination(socket: Socket, policy: Policy, host: string, port: number): Promise<IdentityClaim | undefined>;
  /** Forward requests: a promise to wait for while the connection's lookup runs, else undefined (go on now). */
  ready(socket: Socket, policy: Policy): Promise<void> | undefined;
  /** The claim of a forward connection, for its requests' intents (after ready()). */
  settled(socket: Socket): IdentityClaim | undefined;
  /** Why identities cannot be established while the policy needs them (/readyz), or undefined. */
  problem(policy: Policy): string | undefined;
}

/** The claim a lookup result makes. */
function claimOf(result: IdentityResult): IdentityClaim {
  if (!result.ok) return { kind: 'unavailable', failure: result.failure, detail: result.detail };
  const { pid, exe, ancestors, cmdlinePaths, resolved } = result.identity;
  const claim: ProcessClaim = { kind: 'process', pid, exe, ancestors, cmdlinePaths, resolved: new Map(resolved) };
  return claim;
}

/** Both ends of an accepted connection, as the identity source asks for them. */
function lookupOf(source: IdentitySource, socket: Socket, paths: readonly string[]): Promise<IdentityClaim> {
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (remoteAddress === undefined || remotePort === undefined || localAddress === undefined || localPort === undefined) {
    return Promise.resolve({ kind: 'unavailable', failure: 'socket-not-found', detail: 'the client connection closed before it was looked up' });
  }
  return source.lookup({ client: { ip: remoteAddress, port: remotePort }, proxy: { ip: localAddress, port: localPort }, paths }).then(claimOf);
}

export function createIdentityGate(options: { readonly mode: BinaryIdentityMode; readonly source?: IdentitySource | undefined }): IdentityGate {
  const { mode, source } = options;
  // Forward connections: one lookup each, kept with the socket.
  const lookups = new WeakMap<Socket, { claim?: IdentityClaim; pending?: Promise<void> }>();
  const lookup = (socket: Socket, paths: readonly string[]): Promise<IdentityClaim> =>
    source === undefined ? Promise.resolve({ kind: 'unavailable', failure: 'source-unavailable', detail: 'no identity source is configured' }) : lookupOf(source, socket, paths);
  return {
    async forDestination(socket, policy, host, port) {
      if (mode === 'endpoint-only') return undefined;
      if (!identityNeededAt(policy, host, port)) return NOT_LOOKED_UP;
      return lookup(socket, pathsToResolve(policy, { host, port }));
    },
    ready(socket, policy) {
      if (mode === 'endpoint-only' || !policyNeedsIdentity(policy)) return undefined;
      const known = lookups.get(socket);
      if (known?.claim !== undefined) return undefined;
      if (known?.pending !== undefined) return known.pending;
      const entry: { claim?: IdentityClaim; pending?: Promise<void> } = {};
      entry.pending = lookup(socket, pathsToResolve(policy)).then((claim) => {
        entry.claim = claim;
        delete entry.pending;
      });
      lookups.set(socket, entry);
      return entry.pending;
    },
    settled(socket) {
      if (mode === 'endpoint-only') return undefined;
      return lookups.get(socket)?.claim ?? NOT_LOOKED_UP;
    },
    problem(policy) {
      if (mode === 'endpoint-only' || !policyNeedsIdentity(policy)) return undefined;
      if (source === undefined) return 'identity-unavailable: no identity source is configured';
      const problem = source.problem();
      return problem === undefined ? undefined : `identity-unavailable: ${problem}`;
    },
  };
}

/** The claim of a request's connection: its tunnel's, or the forward connection's; none without a gate. */
export function requestIdentity(gate: IdentityGate | undefined, socket: Socket | undefined, scope: TunnelTarget | undefined): IdentityClaim | undefined {
  if (scope !== undefined) return scope.identity;
  // Every request outside a tunnel arrives on its own connection; one without is decided as unidentifiable.
  if (socket === undefined) return gate === undefined ? undefined : { kind: 'unavailable', failure: 'socket-not-found', detail: 'the request has no client connection' };
  return gate?.settled(socket);
}

/** What the decision event says of the identity it was made with (docs/events.md#identity-fields). */
export function identityFields(decision: Decision, claim: IdentityClaim | undefined): Record<string, unknown> {
  const fields: Record<string, unknown> = { identity: decision.binaryIdentity };
  if (claim?.kind === 'process') {
    fields.binary = claim.exe;
    if (claim.pid !== undefined) fields.binary_pid = claim.pid;
    if (decision.binaryAncestor !== undefined) fields.binary_ancestor = decision.binaryAncestor;
  }
  if (decision.identityFailure !== undefined) fields.identity_failure = decision.identityFailure;
  return fields;
}
