// One process holding a socket, as policy gets to see it (docs/identity.md#verification): refused whole when it
// may run injected code (a loader variable, a mapping of a writable file), else its executable and ancestors, each
// verified where a policy path could name it, with policy paths resolved in the same trusted view.

import type { Distrusted } from '../policy/binary-identity.js';
import { loaderVariable, writableMapping } from './proc-code.js';
import type { Chain, ChainLink } from './proc-process.js';
import type { ScanContext } from './proc-scan.js';
import { rootKey, verifyExecutable, viewOf } from './proc-verify.js';
import { failed, type IdentityResult, type LookupRequest, MAX_IDENTITY_PATH_BYTES, type ProcessIdentity } from './source.js';
import { resolvePaths } from './symlinks.js';

type HolderResult = { readonly ok: true; readonly identity: ProcessIdentity } | Extract<IdentityResult, { ok: false }>;

/** Whether a policy path could name `path`: so its executable is verified (never fewer than could match). */
function candidates(request: LookupRequest, resolved: readonly (readonly [string, string])[]): (path: string) => boolean {
  const exact = new Set([...request.paths, ...resolved.map(([, to]) => to)]);
  // A glob's literal prefix: a path without it cannot match, one with it might.
  const prefixes = (request.globs ?? []).map((glob) => glob.slice(0, glob.indexOf('*')));
  return (path) => exact.has(path) || prefixes.some((prefix) => path.startsWith(prefix));
}

export async function holderIdentity(ctx: ScanContext, chain: Chain, request: LookupRequest): Promise<HolderResult> {
  const { owner } = chain;
  const links: readonly ChainLink[] = [owner, ...chain.ancestors];
  const who = `pid ${owner.pid} (${owner.exe})`;
  const loader = await loaderVariable(ctx, owner.pid);
  if (loader !== undefined) return failed('loader-injection', `${who}: ${loader}`);
  const namespaces = new Map<number, string | undefined>();
  const viewPid = await viewOf(ctx, links, 0, namespaces);
  const key = viewPid === undefined ? undefined : await rootKey(ctx, viewPid);
  const view = viewPid === undefined || key === undefined ? undefined : { pid: viewPid, key };
  if (view === undefined) return failed('executable-unverified', `${who} runs in a user namespace of its own, under no process outside it: nothing it runs can be verified`);
  const mapped = await writableMapping(ctx, owner.pid, owner.exe, view, ctx.mappings);
  if (mapped !== undefined) return failed('writable-code', `${who} runs code mapped from ${mapped}, a file the workload could write`);
  // Resolved in the trusted view, never in a private namespace where the workload chose what a link names.
  const usable = request.paths.filter((p) => Buffer.byteLength(p) <= MAX_IDENTITY_PATH_BYTES);
  const resolved = await resolvePaths(ctx.fs, ctx.links, ctx.root, view.pid, usable);
  const couldGrant = candidates(request, resolved);
  const verified = new Set<string>();
  const distrusted: Distrusted[] = [];
  for (const [i, link] of links.entries()) {
    const exe = link.exe;
    if (exe === undefined || !couldGrant(exe)) continue;
    const linkView = i === 0 ? viewPid : await viewOf(ctx, links, i, namespaces);
    let failure = await verifyExecutable(ctx, { ...link, exe }, linkView);
    // An ancestor grants its whole subtree: one that loads code by its environment grants nothing.
    if (failure === undefined && i > 0 && (await loaderVariable(ctx, link.pid)) !== undefined) failure = { path: exe, failure: 'loader-injection' };
    if (failure === undefined) verified.add(exe);
    else distrusted.push(failure);
  }
  // A path that failed in one process of the chain is not taken as verified from another.
  for (const bad of distrusted) verified.delete(bad.path);
  const ancestors = chain.ancestors.flatMap((link) => (link.exe === undefined ? [] : [link.exe]));
  return {
    ok: true,
    identity: { pid: owner.pid, exe: owner.exe, ancestors, cmdlinePaths: chain.cmdlinePaths, resolved, verified: [...verified], distrusted },
  };
}
