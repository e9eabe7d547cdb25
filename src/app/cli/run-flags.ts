// `boundary run`'s flags: the help text and argv -> the raw input of parseConfig (config.ts validates it), with
// paths resolved against cwd. Never reads the process: run.ts passes argv and cwd in.

import { isAbsolute, resolve } from 'node:path';

export const RUN_HELP = `Usage: boundary run --policy FILE [options]
       boundary run --supervisor HOST:PORT --tls-dir DIR --sandbox-id ID [options]

  --policy FILE                     policy file (watched; a change loads as a new generation)
  --proxy-listen HOST:PORT          proxy listener (default 127.0.0.1:3128)
  --admin-listen HOST:PORT          /healthz /readyz /metrics (default 127.0.0.1:9901)
  --state-dir DIR                   interception CA and state (default .boundary)
  --ca-cert FILE --ca-key FILE      use this interception CA instead of creating one
  --ca-out FILE                     write the CA certificate here (default <state-dir>/ca.pem); for
                                    NODE_EXTRA_CA_CERTS, which adds to Node's roots
  --ca-bundle-out FILE              write the workload trust bundle here: system roots + --upstream-ca + the CA
                                    (default <state-dir>/ca-bundle.pem); for SSL_CERT_FILE, CURL_CA_BUNDLE,
                                    REQUESTS_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO, npm_config_cafile, which replace
                                    a client's roots
  --upstream-ca FILE                extra trust anchors for upstream TLS (beside the system roots)
  --upstream-dns HOST:PORT          trusted DNS server (default: first nameserver in /etc/resolv.conf)
  --hosts FILE                      hosts file consulted before DNS
  --dns-listen HOST:PORT            policy DNS, UDP and TCP (default 127.0.0.1:15053; 127.0.0.1:53 in a pod)
  --dns-workers N                   threads that answer repeated policy DNS questions from the answers this
                                    process already made, each on its own socket of the DNS port (SO_REUSEPORT);
                                    everything else is still decided here. 0-16 (default 0: one thread). Needs
                                    Node 22.12 or later (the image's); refused on Node 20. See docs/dns.md
  --synthetic-cidr CIDR             synthetic answers, captured per (address, port) (default 198.18.0.0/15)
  --capture required|optional|off   transparent capture of connections to synthetic addresses; it needs the range
                                    routed to lo ('ip route add local 198.18.0.0/15 dev lo' as root, or
                                    'boundary init-netns'). required: /readyz is 503 until capture binds;
                                    optional: tried, and without the route /readyz stays 200 and says so while
                                    the proxy serves; off: no capture listeners (default optional; required with
                                    --supervisor)
  --dns-tunnel-detection off|audit|enforce
                                    tunnelling-shaped names under an allowed wildcard: a finding (audit, the
                                    default), or a finding and REFUSED without asking upstream (enforce); the
                                    same for names the proxy resolves (CONNECT, forward HTTP), refused with 403
  --new-names-per-second N          new names under wildcard entries sent to the upstream resolver per second,
                                    by policy DNS and the proxy together; more get REFUSED (DNS) or 429 (default 10)
  --new-names-burst N               new names in a burst before that rate applies (default 100)
  --log-format json|shorthand       audit line format (default json; shorthand when stdout is a terminal)
  --on-invalid-policy keep|deny-all what an invalid policy change does (default keep)
  --unsafe-allow-loopback-upstream  let upstreams on 127.0.0.0/8 and ::1 through (development only)
  --credentials FILE                credential providers (YAML, watched; a rotation applies to the next request)
  --middleware-config FILE          external network middleware services policies may name (YAML 'services:'
                                    list; read at start; standalone only: attached, the supervisor registers
                                    them). See docs/running.md#middleware-services
  --binary-identity required|endpoint-only
                                    policy binaries: enforced on the process that opened each connection, failing
                                    closed when it cannot be identified (required, the default), or not checked
                                    (endpoint-only; every decision says so). See docs/identity.md
  --identity-socket PATH            ask 'boundary identity serve' on this unix socket for processes (a privileged
                                    sidecar); without it boundary reads /proc itself
  --placeholder-family openshell|ryno
                                    the credential placeholders boundary resolves: openshell:resolve:env:KEY (the
                                    default) or ryno:resolve:env:KEY; the other family is refused, never forwarded
  --upstream-proxy URL              send every upstream connection through this HTTP proxy (http://HOST:PORT or
                                    https://HOST:PORT) as CONNECT <validated IP>:<port>; never read from
                                    HTTP(S)_PROXY. See docs/running.md#corporate-upstream-proxy
  --upstream-proxy-auth-file FILE   user:pass for the proxy (Proxy-Authorization: Basic); over an http:// proxy
                                    only with --upstream-proxy-auth-insecure
  --upstream-proxy-auth-insecure    allow the auth file with an http:// proxy (the password then travels in clear)
  --upstream-proxy-ca FILE          trust anchors for an https:// proxy's own certificate (beside the system roots)
  --no-upstream-proxy LIST          dial these directly: names (and names under them), IPs, CIDRs, each with an
                                    optional :PORT; an IP or CIDR entry covers only the addresses inside it
  --upstream-proxy-connect-by-name  CONNECT by the destination's name (for proxies that require names): the
                                    address the proxy then reaches is its own resolution, not pinned by boundary
  --peer-policy-header none|openshell|ryno
                                    a denial names its policy in X-Boundary-Policy and, for clients written against
                                    a peer, also in X-OpenShell-Policy or X-Ryno-Policy (default none)
  --max-connections N               proxy connections open at once; more get 503 too_many_connections (default 4096)
  --max-connections-per-source-percent P
                                    the share of N one client address may hold; beyond it that client gets 503
                                    too_many_connections_from_source (default 50; 100: no per-address share)
  --close-grace-ms N                on SIGTERM, how long requests in flight may finish (default 5000)
  --shutdown-drain-ms N             on SIGTERM, the drain deadline: what is still open then is destroyed and run
                                    exits 3 (default 8000; keep it above --close-grace-ms and below the pod's
                                    terminationGracePeriodSeconds)

Attached mode (instead of --policy): policy, credentials and relays come from the supervisor; until its
first policy is effective all egress is denied and /readyz is 503 with the reason.
  --supervisor HOST:PORT            the supervisor's mTLS HTTP/2 control listener
  --tls-dir DIR                     DIR/ca.pem, cert.pem, key.pem ('boundary pki issue --sandbox ID --out DIR')
  --sandbox-id ID                   this sandbox, as named in the client certificate
  --instance-id ID                  stable across restarts of this instance (default $HOSTNAME, else the sandbox id)
  --relay-allow LIST                loopback PORT or HOST:PORT entries a relay may reach (default: none)
  (--on-invalid-policy is standalone only; attached, the supervisor's failure mode governs pushed policies)
`;

const VALUE_FLAGS: Readonly<Record<string, string>> = {
  '--policy': 'policyFile',
  '--proxy-listen': 'proxyListen',
  '--admin-listen': 'adminListen',
  '--state-dir': 'stateDir',
  '--ca-cert': 'caCert',
  '--ca-key': 'caKey',
  '--ca-out': 'caOut',
  '--ca-bundle-out': 'caBundleOut',
  '--upstream-ca': 'upstreamCa',
  '--upstream-dns': 'upstreamDns',
  '--hosts': 'hostsFile',
  '--dns-listen': 'dnsListen',
  '--dns-workers': 'dnsWorkers',
  '--synthetic-cidr': 'syntheticCidr',
  '--capture': 'capture',
  '--dns-tunnel-detection': 'dnsTunnelDetection',
  '--new-names-per-second': 'newNamesPerSecond',
  '--new-names-burst': 'newNamesBurst',
  '--log-format': 'logFormat',
  '--on-invalid-policy': 'onInvalidPolicy',
  '--credentials': 'credentialsFile',
  '--middleware-config': 'middlewareConfig',
  '--supervisor': 'supervisor',
  '--tls-dir': 'tlsDir',
  '--sandbox-id': 'sandboxId',
  '--instance-id': 'instanceId',
  '--relay-allow': 'relayAllow',
  '--max-connections': 'limits',
  '--max-connections-per-source-percent': 'limits',
  '--close-grace-ms': 'limits',
  '--shutdown-drain-ms': 'shutdownDrainMs',
  '--binary-identity': 'binaryIdentity',
  '--identity-socket': 'identitySocket',
  '--placeholder-family': 'placeholderFamily',
  '--upstream-proxy': 'upstreamProxy',
  '--upstream-proxy-auth-file': 'upstreamProxyAuthFile',
  '--upstream-proxy-ca': 'upstreamProxyCa',
  '--no-upstream-proxy': 'noUpstreamProxy',
  '--peer-policy-header': 'peerPolicyHeader',
};
/** Flags without a value, each setting its key to true. */
const SWITCH_FLAGS: Readonly<Record<string, string>> = {
  '--unsafe-allow-loopback-upstream': 'unsafeAllowLoopbackUpstream',
  '--upstream-proxy-auth-insecure': 'upstreamProxyAuthInsecure',
  '--upstream-proxy-connect-by-name': 'upstreamProxyConnectByName',
};
/** The flags of config.limits, each a positive integer that parseConfig checks. */
const LIMIT_FLAGS: Readonly<Record<string, string>> = {
  '--max-connections': 'maxConnections',
  '--max-connections-per-source-percent': 'maxConnectionsPerSourcePercent',
  '--close-grace-ms': 'closeGraceMs',
};
/** Top-level numeric keys; parseConfig checks their range. */
const NUMBER_KEYS: ReadonlySet<string> = new Set(['shutdownDrainMs', 'newNamesPerSecond', 'newNamesBurst', 'dnsWorkers']);
const PATH_KEYS: ReadonlySet<string> = new Set(['policyFile', 'stateDir', 'caCert', 'caKey', 'caOut', 'caBundleOut', 'upstreamCa', 'hostsFile', 'credentialsFile', 'middlewareConfig', 'tlsDir', 'identitySocket', 'upstreamProxyAuthFile', 'upstreamProxyCa']);

/** Flags -> the raw input of parseConfig; paths resolved against cwd. Returns a usage message on error. */
export function parseRunFlags(argv: readonly string[], cwd: string): Record<string, unknown> | string {
  const raw: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const switched = SWITCH_FLAGS[flag];
    if (switched !== undefined) {
      raw[switched] = true;
      continue;
    }
    const key = VALUE_FLAGS[flag];
    if (key === undefined) return `unknown option ${arg}`;
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined) return `${flag} needs a value`;
    const limit = LIMIT_FLAGS[flag];
    if (limit !== undefined) {
      const limits = (raw.limits ?? {}) as Record<string, number>;
      if (limits[limit] !== undefined) return `${flag} given twice`;
      raw.limits = { ...limits, [limit]: integerOf(value) };
      continue;
    }
    if (raw[key] !== undefined) return `${flag} given twice`;
    if (NUMBER_KEYS.has(key)) raw[key] = integerOf(value);
    else raw[key] = PATH_KEYS.has(key) && !isAbsolute(value) ? resolve(cwd, value) : value;
  }
  return raw;
}


/** Decimal digits as a number; anything else NaN, which parseConfig's integer checks refuse with the key's path. */
function integerOf(value: string): number {
  return /^\d+$/.test(value) ? Number(value) : Number.NaN;
}
