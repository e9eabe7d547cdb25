// `boundary init-netns`: the pod's init step. Makes the synthetic range local (so boundary can accept
// connections to any synthetic address without iptables redirects), sends every other uid's DNS to boundary's
// policy DNS while boundary's own DNS keeps a conntrack zone of its own, and installs the fence: output that is
// not loopback and not boundary's own uid is rejected at once.
// Idempotent: its rules live in chains of its own, refilled on every run, so a restarted init container
// leaves exactly one copy.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parseCidr } from '../../net/ip.js';
import type { Command } from './io.js';

const run = promisify(execFile);

export const DEFAULT_SYNTHETIC_CIDR = '198.18.0.0/15';
export const DEFAULT_BOUNDARY_UID = 10001;
/** Above 1023, so boundary's policy DNS binds it without NET_BIND_SERVICE. */
export const DEFAULT_DNS_PORT = 15053;
export const FENCE_CHAIN = 'BOUNDARY-FENCE';
export const DNS_CHAIN = 'BOUNDARY-DNS';
export const DNS_ZONE_CHAIN = 'BOUNDARY-DNS-ZONE';
/**
 * The conntrack zone of boundary's own DNS queries (docs/kubernetes.md#boundarys-own-dns). A workload's redirected
 * query leaves a DNAT entry behind; in the same zone, boundary's next query from that source port would match it
 * and be redirected to boundary's own policy DNS.
 */
export const DNS_CONNTRACK_ZONE = 53;
// boundary's policy DNS listens here (config DEFAULTS.dnsListen host); the redirect and the fence name it.
const DNS_ADDRESS = '127.0.0.1';
const DNS_PORT = '53';
const MAX_PORT = 65_535;

const HELP = `Usage: boundary init-netns [--synthetic-cidr CIDR] [--boundary-uid UID] [--dns-port PORT]
                          [--no-dns-redirect] [--no-fence] [--dry-run]

Run once per pod network namespace, with NET_ADMIN (an init container); running it again changes nothing:
  --synthetic-cidr CIDR   range answered by policy DNS (default ${DEFAULT_SYNTHETIC_CIDR}); routed to lo
  --boundary-uid UID      uid that boundary runs as; only it may send off-host (default ${DEFAULT_BOUNDARY_UID})
  --dns-port PORT         every other uid's DNS (UDP and TCP port 53, to any address) goes to boundary's
                          policy DNS on ${DNS_ADDRESS}:PORT (default ${DEFAULT_DNS_PORT}); boundary's own uid
                          still reaches the nameserver in /etc/resolv.conf, its queries in conntrack zone
                          ${DNS_CONNTRACK_ZONE} (raw table, CT target) so that no redirected flow is ever mistaken
                          for one of its own.
                          IPv4 only: policy DNS listens on ${DNS_ADDRESS}, and the fence rejects the
                          workload's IPv6 DNS at once instead
  --no-dns-redirect       leave DNS alone
  --no-fence              add the route (and the DNS redirect) only
  --dry-run               print the commands instead of running them
`;

interface NetnsOptions {
  readonly cidr: string;
  readonly uid: number;
  readonly fence: boolean;
  /** Redirect other uids' DNS to this port on 127.0.0.1; absent: no redirect. */
  readonly dnsPort?: number;
}

/** One command; with `unless`, it runs only when that check fails (what it would add is not there yet). */
export interface NetnsStep {
  readonly run: readonly string[];
  readonly unless?: readonly string[];
}

/** A step as one shell line: what --dry-run prints. */
export function formatStep(step: NetnsStep): string {
  const command = step.run.join(' ');
  return step.unless === undefined ? command : `${step.unless.join(' ')} || ${command}`;
}

/**
 * Create `chain` if it is missing, empty it, fill it with `rules`, and jump to it first thing in OUTPUT unless
 * that jump exists already. The jump goes in last, so a first run never applies a half-filled chain.
 */
function ownChain(tool: string, table: string, chain: string, rules: readonly (readonly string[])[]): NetnsStep[] {
  const base = [tool, '-w', '-t', table];
  return [
    { run: [...base, '-N', chain], unless: [...base, '-S', chain] },
    { run: [...base, '-F', chain] },
    ...rules.map((rule) => ({ run: [...base, '-A', chain, ...rule] })),
    { run: [...base, '-I', 'OUTPUT', '1', '-j', chain], unless: [...base, '-C', 'OUTPUT', '-j', chain] },
  ];
}

const PROTOCOLS = ['udp', 'tcp'];

function dnsRedirect(uid: number, port: number): NetnsStep[] {
  // Conntrack looks a packet up before the nat rules see it, so the owner match of the redirect only decides new
  // flows. boundary's queries are looked up in a zone of their own, which no redirected flow is in; the zone is the
  // original direction's only, so the answers, looked up in the reply direction, match without a rule of their own.
  const zone = PROTOCOLS.map((protocol) => [
    '-p', protocol, '--dport', DNS_PORT, '-m', 'owner', '--uid-owner', String(uid), '-j', 'CT', '--zone-orig', String(DNS_CONNTRACK_ZONE),
  ]);
  const redirect = PROTOCOLS.map((protocol) => [
    '-p', protocol, '--dport', DNS_PORT, '-m', 'owner', '!', '--uid-owner', String(uid),
    '-j', 'DNAT', '--to-destination', `${DNS_ADDRESS}:${port}`,
  ]);
  return [...ownChain('iptables', 'raw', DNS_ZONE_CHAIN, zone), ...ownChain('iptables', 'nat', DNS_CHAIN, redirect)];
}

function fenceRules(tool: string, uid: number, dnsPort: number | undefined): string[][] {
  const rules = [['-o', 'lo', '-j', 'ACCEPT']];
  // The filter hook still sees the interface routed before the DNAT (the nameserver's, not lo), so `-o lo`
  // misses redirected DNS. This matches the rewritten destination, which the re-route delivers to lo.
  if (tool === 'iptables' && dnsPort !== undefined) {
    for (const protocol of ['udp', 'tcp']) rules.push(['-d', `${DNS_ADDRESS}/32`, '-p', protocol, '--dport', String(dnsPort), '-j', 'ACCEPT']);
  }
  rules.push(['-m', 'owner', '--uid-owner', String(uid), '-j', 'ACCEPT']);
  // Answers to connections that came *in* (the kubelet's probes and Prometheus on boundary's admin port): the
  // kernel sends some of their packets (a SYN-ACK, a TIME_WAIT ACK) from sockets the owner match cannot see,
  // and rejecting them reset about one probe in four. REPLY only: a packet in the direction of a flow this
  // pod started, boundary's included, never passes here, so no workload packet can ride a flow of boundary's.
  rules.push(['-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '--ctdir', 'REPLY', '-j', 'ACCEPT']);
  // IPv6 finds on-link neighbours with ICMPv6 that the kernel sends under no uid; rejecting it would cut
  // boundary's own IPv6 too (ARP, the IPv4 equivalent, never reaches iptables). Without CAP_NET_RAW a
  // workload cannot send these types, so they carry nothing of its own.
  if (tool === 'ip6tables') {
    for (const type of ['neighbour-solicitation', 'neighbour-advertisement']) rules.push(['-p', 'ipv6-icmp', '--icmpv6-type', type, '-j', 'ACCEPT']);
  }
  // A TCP reset is ECONNREFUSED for the caller: a bypass attempt fails at once, not after a timeout.
  rules.push(['-p', 'tcp', '-j', 'REJECT', '--reject-with', 'tcp-reset'], ['-j', 'REJECT']);
  return rules;
}

/** The steps, in order. Exported so a test can check them without root. */
export function netnsCommands(options: NetnsOptions): NetnsStep[] {
  const steps: NetnsStep[] = [{ run: ['ip', 'route', 'replace', 'local', options.cidr, 'dev', 'lo'] }];
  if (options.dnsPort !== undefined) steps.push(...dnsRedirect(options.uid, options.dnsPort));
  if (!options.fence) return steps;
  for (const tool of ['iptables', 'ip6tables']) steps.push(...ownChain(tool, 'filter', FENCE_CHAIN, fenceRules(tool, options.uid, options.dnsPort)));
  return steps;
}

async function succeeds(command: readonly string[]): Promise<boolean> {
  const [file, ...args] = command;
  try {
    await run(file ?? '', args);
    return true;
  } catch {
    return false;
  }
}

export const initNetnsCommand: Command = async (argv, io) => {
  let cidr = DEFAULT_SYNTHETIC_CIDR;
  let uid = DEFAULT_BOUNDARY_UID;
  let dnsPort: number | undefined = DEFAULT_DNS_PORT;
  let fence = true;
  let dryRun = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      io.stdout.write(HELP);
      return 0;
    } else if (arg === '--synthetic-cidr') cidr = argv[++i] ?? '';
    else if (arg === '--boundary-uid') uid = Number(argv[++i]);
    else if (arg === '--dns-port') dnsPort = Number(argv[++i]);
    else if (arg === '--no-dns-redirect') dnsPort = undefined;
    else if (arg === '--no-fence') fence = false;
    else if (arg === '--dry-run') dryRun = true;
    else {
      io.stderr.write(`init-netns: unknown option ${String(arg)} (USAGE)\n${HELP}`);
      return 2;
    }
  }
  const badPort = dnsPort !== undefined && !(Number.isInteger(dnsPort) && dnsPort >= 1 && dnsPort <= MAX_PORT);
  if (parseCidr(cidr) === undefined || !Number.isSafeInteger(uid) || uid < 0 || badPort) {
    io.stderr.write(`init-netns: --synthetic-cidr must be a CIDR, --boundary-uid a uid and --dns-port a port (USAGE)\n`);
    return 2;
  }
  for (const step of netnsCommands({ cidr, uid, fence, ...(dnsPort === undefined ? {} : { dnsPort }) })) {
    io.stdout.write(`${formatStep(step)}\n`);
    if (dryRun || (step.unless !== undefined && (await succeeds(step.unless)))) continue;
    const [file, ...args] = step.run;
    if (file !== undefined) await run(file, args);
  }
  return 0;
};
