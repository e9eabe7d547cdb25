// The banner `boundary run` writes to stderr when stdout is a terminal: the bound listeners, the CA and
// trust bundle files, and the lines that point a client at them. Pure text; run.ts decides when to print it.

import { formatAuthority } from '../net/host.js';

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
  /** The synthetic range captured, and why capture cannot work (transparent.problem()), if it cannot. */
  readonly capture: { readonly cidr: string; readonly problem: string | undefined };
}

// A listener on every address is reached by a client on the same host through loopback.
function reachable(address: BannerAddress): string {
  const host = address.host === '0.0.0.0' ? '127.0.0.1' : address.host === '::' ? '::1' : address.host;
  return formatAuthority(host, address.port);
}

/** The banner text, ending in a blank line. */
export function formatRunBanner(info: RunBannerInfo): string {
  const proxyUrl = `http://${reachable(info.proxy)}`;
  const ready = info.interception === 'ready';
  const rows: [string, string][] = [
    ['proxy', `${proxyUrl} (HTTP proxy and CONNECT)`],
    ['policy DNS', info.dns === undefined ? 'not listening' : `${formatAuthority(info.dns.host, info.dns.port)} (udp, tcp)`],
    ['admin', `http://${reachable(info.admin)}/readyz  /healthz  /metrics`],
    // Without `boundary init-netns` (root) the range is not local: the proxy works, capture and /readyz do not.
    ['capture', info.capture.problem === undefined ? `${info.capture.cidr} (transparent)` : info.capture.problem],
    ['CA', ready ? info.caFile : `${info.caFile} (interception ${info.interception})`],
    ['trust bundle', info.bundleFile === undefined ? 'not written' : ready ? `${info.bundleFile} (system roots + upstream CAs + CA)` : 'not written: no CA'],
  ];
  const lines = [`boundary is running (${info.mode})`, ...rows.map(([name, value]) => `  ${name.padEnd(13)}${value}`), '', 'Point a client at it:'];
  lines.push(`  export http_proxy=${proxyUrl} https_proxy=${proxyUrl}`);
  if (ready) {
    const bundle = info.bundleFile === undefined ? '' : `SSL_CERT_FILE=${info.bundleFile} REQUESTS_CA_BUNDLE=${info.bundleFile} `;
    lines.push(`  export ${bundle}NODE_EXTRA_CA_CERTS=${info.caFile}`);
  }
  return `${lines.join('\n')}\n\n`;
}
