// Turns validated entry drafts into the deep-frozen Policy: ids and order, binary matchers, the host index and
// the policy hash. Written as steps (a generator that yields between entries) so a reload can run it in
// bounded slices on the event loop; drain() runs the same steps in one go. Pure.

import { createHash } from 'node:crypto';
import type { Issue } from '../shared/errors.js';
import { canonicalJson, createFreezer, sha256Hex } from './canonical.js';
import { compileBinaryGlob } from './glob.js';
import { buildHostIndex, type IndexedEndpoint } from './host-index.js';
import type { MiddlewareDraft } from './middleware-section.js';
import { compileMiddlewares } from './middleware-select.js';
import type { Endpoint, Policy, PolicyEntry } from './types.js';
import type { EndpointDraft } from './validate-endpoint.js';

export interface EntryDraft {
  readonly key: string;
  readonly name: string;
  readonly binaries: readonly string[];
  readonly endpoints: readonly EndpointDraft[];
}

/** Steps of a parse or compile: each `yield` is a point where the caller may give the event loop a turn. */
export type Steps<T> = Generator<void, T, void>;

/** Runs steps to the end without yielding to anyone (parsePolicy, `policy check`, the parse worker). */
export function drain<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
  }
}

export function* compileSteps(
  drafts: readonly EntryDraft[],
  warnings: readonly Issue[],
  notEnforced: readonly string[],
  middlewareDrafts: readonly MiddlewareDraft[] = [],
): Steps<Policy> {
  const freeze = createFreezer();
  const endpoints: Endpoint[] = [];
  const indexed: IndexedEndpoint[] = [];
  const entries: PolicyEntry[] = [];
  for (const draft of drafts) {
    const globs = draft.binaries.map(compileBinaryGlob);
    const matchesBinary = (path: string): boolean => globs.some((g) => g.matches(path));
    const entryEndpoints: Endpoint[] = [];
    for (const [index, d] of draft.endpoints.entries()) {
      // Every field named, none spread: one object shape for all endpoints. Spreading the draft gave each
      // endpoint its own hidden-class transitions, 8.7 KB of garbage apiece (87 MB at 10,000 endpoints).
      const endpoint: Endpoint = freeze({
        id: `${draft.key}#${index}`,
        policy: draft.key,
        policyName: draft.name,
        index,
        host: d.host,
        hostKind: d.hostKind,
        ports: d.ports,
        protocol: d.protocol,
        tls: d.tls,
        enforcement: d.enforcement,
        path: d.path,
        allowedIps: d.allowedIps,
        allowEncodedSlash: d.allowEncodedSlash,
        allowEncodedBackslash: d.allowEncodedBackslash,
        allowEncodedNul: d.allowEncodedNul,
        credentialProvider: d.credentialProvider,
        requestBodyCredentialRewrite: d.requestBodyCredentialRewrite,
        websocketCredentialRewrite: d.websocketCredentialRewrite,
        allowUninspectedCredentials: d.allowUninspectedCredentials,
        binaries: draft.binaries,
        inspected: d.inspected,
        order: endpoints.length,
        access: d.access,
        rules: d.rules,
        denyRules: d.denyRules,
        selectorSpecificity: d.selectorSpecificity,
        selectsPath: d.selectsPath,
        credentialSigning: d.credentialSigning,
        signingService: d.signingService,
        signingRegion: d.signingRegion,
        options: d.options,
        matchesBinary,
      });
      endpoints.push(endpoint);
      entryEndpoints.push(endpoint);
      indexed.push({ endpoint, matcher: d.matcher });
      yield;
    }
    entries.push(freeze({ key: draft.key, name: draft.name, endpoints: entryEndpoints, binaries: draft.binaries, matchesBinary }));
  }
  // The hash is canonicalJson({ version: 1, network_middlewares?, network_policies }) over entries in key order
  // (policyHash below), fed to the digest one entry per step instead of built as one string. Without middlewares it
  // is the hash of the network policies alone, as before the section loaded.
  const digest = createHash('sha256');
  if (middlewareDrafts.length > 0) {
    const byKey = [...middlewareDrafts].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    digest.update(`{"network_middlewares":${canonicalJson(byKey.map((d) => d.canonical))},"network_policies":[`);
  } else digest.update('{"network_policies":[');
  const sorted = [...drafts].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const [i, d] of sorted.entries()) {
    if (i > 0) digest.update(',');
    digest.update(canonicalJson({ binaries: d.binaries, endpoints: d.endpoints.map((e) => e.canonical), key: d.key, name: d.name }));
    yield;
  }
  const hash = digest.update('],"version":1}').digest('hex');
  const endpointsForHost = buildHostIndex(indexed);
  const { middlewares, middlewaresFor } = compileMiddlewares(middlewareDrafts);
  yield;
  return freeze({
    generation: 0,
    hash,
    entries,
    endpoints,
    warnings: [...warnings],
    notEnforced: [...notEnforced],
    endpointsForHost,
    middlewares,
    middlewaresFor,
  });
}

/** sha256 of the canonical JSON of the network policy; `[]` is the empty (deny-all) policy. */
export function policyHash(canonicalEntries: readonly unknown[]): string {
  return sha256Hex(canonicalJson({ version: 1, network_policies: canonicalEntries }));
}
