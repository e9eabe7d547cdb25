// The banner `boundary run` writes to stderr when stdout is a terminal: the bound listeners, the CA and
// trust bundle files, and the export block that points a client at them. Pure text; run.ts decides when to print it.

import type { CaptureMode } from '../config.js';
import { formatAuthority } from '../../net/host.js';

interface BannerAddress {
  readonly host: string;
  readonly port: number;
}

interface RunBannerInfo {
  /** `standalone, policy FILE` or `attached to supervisor HOST:PORT`. */
  readonly mode: string;
  readonly proxy: BannerAddress;
  readonly dns: BannerAddress | undefined;
  readonly admin: BannerAddress;
  readonly caFile: string;
  readonly bundleFile: string | undefined;
  /** `ready`, or `unavailable: <why>` (readiness().interception). */
  readonly interception: string;
  /** The synthetic range, `--capture`, and why capture cannot bind (transparent.capture()), if it cannot. */
  readonly capture: { readonly cidr: string; readonly mode: CaptureMode; readonly problem: string | undefined };
}

/** Loopback in every spelling clients compare literally: admin and policy DNS calls never go through the proxy. */
export const NO_PROXY = '127.0.0.1,localhost,::1';
/**
 * The variables that replace a client's roots, so they get the bundle (system roots + upstream CAs + the CA).
 * npm_config_cafile too: npm ignores NODE_EXTRA_CA_CERTS wherever an npmrc sets a cafile, and the variable wins.
 */
export const BUNDLE_VARIABLES = ['SSL_CERT_FILE', 'CURL_CA_BUNDLE', 'REQUESTS_CA_BUNDLE', 'PIP_CERT', 'GIT_SSL_CAINFO', 'npm_config_cafile'] as const;

// A listener on every address is reached by a client on the same host through loopback.
function reachable(address: BannerAddress): string {
  const host = address.host === '0.0.0.0' ? '127.0.0.1' : address.host === '::' ? '::1' : address.host;
  return formatAuthority(host, address.port);
}

/** A value as one shell word: paths with spaces or quotes survive being pasted into sh, bash or zsh. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_./:,@%+=-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

function captureRow(capture: RunBannerInfo['capture']): string {
  if (capture.mode === 'off') return 'off (--capture off): only clients that use the proxy get out';
  if (capture.problem === undefined) return `${capture.cidr} (transparent)`;
  // Without the route (root) the range is not local: optional capture leaves the proxy and /readyz as they are.
  return capture.mode === 'required' ? `${capture.problem}; /readyz is 503 until it binds` : `${capture.problem}; optional: /readyz stays 200, clients use the proxy`;
}

/** The export lines a shell sources to use the proxy and trust the CA; the CA lines only once the CA is ready. */
export function exportBlock(info: Pick<RunBannerInfo, 'proxy' | 'caFile' | 'bundleFile' | 'interception'>): string[] {
  const proxyUrl = `http://${reachable(info.proxy)}`;
  const lines = [
    // curl and wget read only the lower-case names, many other tools only the upper-case ones.
    `export http_proxy=${proxyUrl} https_proxy=${proxyUrl} HTTP_PROXY=${proxyUrl} HTTPS_PROXY=${proxyUrl}`,
    `export no_proxy=${NO_PROXY} NO_PROXY=${NO_PROXY}`,
  ];
  if (info.interception !== 'ready') return lines;
  if (info.bundleFile !== undefined) {
    const bundle = shellWord(info.bundleFile);
    lines.push(`export ${BUNDLE_VARIABLES.map((name) => `${name}=${bundle}`).join(' ')}`);
  }
  // NODE_EXTRA_CA_CERTS adds to Node's roots: the CA alone is right there.
  lines.push(`export NODE_EXTRA_CA_CERTS=${shellWord(info.caFile)}`);
  if (info.bundleFile !== undefined) {
    // Debian's wget links GnuTLS, which reads no variable for its roots.
    lines.push(`# wget reads none of these: wget --ca-certificate=${shellWord(info.bundleFile)} URL (or ca_certificate in ~/.wgetrc)`);
  }
  return lines;
}

/** The banner text, ending in a blank line. */
export function formatRunBanner(info: RunBannerInfo): string {
  const ready = info.interception === 'ready';
  const rows: [string, string][] = [
    ['proxy', `http://${reachable(info.proxy)} (HTTP proxy and CONNECT)`],
    ['policy DNS', info.dns === undefined ? 'not listening' : `${formatAuthority(info.dns.host, info.dns.port)} (udp, tcp)`],
    ['admin', `http://${reachable(info.admin)}/readyz  /healthz  /metrics  /v1/explain  /v1/denials`],
    ['capture', captureRow(info.capture)],
    ['CA', ready ? info.caFile : `${info.caFile} (interception ${info.interception})`],
    ['trust bundle', info.bundleFile === undefined ? 'not written' : ready ? `${info.bundleFile} (system roots + upstream CAs + CA)` : 'not written: no CA'],
  ];
  const lines = [`boundary is running (${info.mode})`, ...rows.map(([name, value]) => `  ${name.padEnd(13)}${value}`), '', 'Point a client at it (paste into a shell):'];
  lines.push(...exportBlock(info).map((line) => `  ${line}`));
  return `${lines.join('\n')}\n\n`;
}
