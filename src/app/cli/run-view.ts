// What `policy check` and `policy explain` know of a run: the switches of `boundary run` that change what a policy
// entry can do (--binary-identity, --unsafe-allow-loopback-upstream, the listen addresses), with run's defaults.
// The proxy answers from the same function (net/destination.ts permanentRefusal) on its bound listeners.

import type { BinaryIdentityMode } from '../../identity/source.js';
import { type PermanentCheck, permanentRefusal } from '../../net/destination.js';
import { prepareSelfAddresses } from '../../net/ssrf.js';
import { parseConfig } from '../config.js';

/** The flags, as `boundary run` spells them. */
export const RUN_VIEW_OPTIONS = {
  'binary-identity': { type: 'string' },
  'unsafe-allow-loopback-upstream': { type: 'boolean' },
  'proxy-listen': { type: 'string' },
  'admin-listen': { type: 'string' },
  'dns-listen': { type: 'string' },
} as const;

export const RUN_VIEW_USAGE = `          As \`boundary run\` with the same flags would decide (its defaults otherwise):
          --binary-identity required|endpoint-only   (default required: an entry without binaries, or with
                   an empty list, matches no process; without --binary only "/**" entries match)
          --unsafe-allow-loopback-upstream   127.0.0.0/8 and ::1 are not always blocked
          --proxy-listen, --admin-listen, --dns-listen HOST:PORT   boundary's own listeners, always blocked
`;

export interface RunView {
  readonly binaryIdentity: BinaryIdentityMode;
  readonly permanent: PermanentCheck;
}

export type RunViewFlags = { readonly [K in keyof typeof RUN_VIEW_OPTIONS]?: (typeof RUN_VIEW_OPTIONS)[K]['type'] extends 'boolean' ? boolean : string };

/** The run the flags describe; a bad flag value throws the config's coded error (the caller reports it as usage). */
export function runViewOf(flags: RunViewFlags): RunView {
  const raw: Record<string, unknown> = {};
  if (flags['binary-identity'] !== undefined) raw.binaryIdentity = flags['binary-identity'];
  if (flags['unsafe-allow-loopback-upstream'] === true) raw.unsafeAllowLoopbackUpstream = true;
  if (flags['proxy-listen'] !== undefined) raw.proxyListen = flags['proxy-listen'];
  if (flags['admin-listen'] !== undefined) raw.adminListen = flags['admin-listen'];
  if (flags['dns-listen'] !== undefined) raw.dnsListen = flags['dns-listen'];
  const config = parseConfig(raw);
  const selfAddresses = prepareSelfAddresses([config.proxyListen, config.adminListen, config.dnsListen].map((l) => ({ ip: l.host === 'localhost' ? '127.0.0.1' : l.host, port: l.port })));
  const allowLoopback = config.unsafeAllowLoopbackUpstream;
  return { binaryIdentity: config.binaryIdentity, permanent: (host, port) => permanentRefusal(host, port, { allowLoopback, selfAddresses }) };
}

