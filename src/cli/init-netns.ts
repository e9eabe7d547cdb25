// `boundary init-netns`: the pod's init step. Makes the synthetic range local (so boundary can accept
// connections to any synthetic address without iptables redirects) and installs the fence: output
// that is not loopback and not boundary's own uid is rejected at once, so a direct dial fails fast.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parseCidr } from '../net/ip.js';
import type { Command } from './io.js';

const run = promisify(execFile);

export const DEFAULT_SYNTHETIC_CIDR = '198.18.0.0/15';
export const DEFAULT_BOUNDARY_UID = 10001;

const HELP = `Usage: boundary init-netns [--synthetic-cidr CIDR] [--boundary-uid UID] [--no-fence] [--dry-run]

Run once per pod network namespace, with NET_ADMIN (an init container):
  --synthetic-cidr CIDR   range answered by policy DNS (default ${DEFAULT_SYNTHETIC_CIDR}); routed to lo
  --boundary-uid UID      uid that boundary runs as; only it may send off-host (default ${DEFAULT_BOUNDARY_UID})
  --no-fence              add the route only
  --dry-run               print the commands instead of running them
`;

/** The commands, in order. Exported so a test can check them without root. */
export function netnsCommands(options: { cidr: string; uid: number; fence: boolean }): string[][] {
  const commands = [['ip', 'route', 'replace', 'local', options.cidr, 'dev', 'lo']];
  if (!options.fence) return commands;
  for (const tool of ['iptables', 'ip6tables']) {
    commands.push(
      [tool, '-w', '-A', 'OUTPUT', '-o', 'lo', '-j', 'ACCEPT'],
      [tool, '-w', '-A', 'OUTPUT', '-m', 'owner', '--uid-owner', String(options.uid), '-j', 'ACCEPT'],
    );
    // IPv6 finds on-link neighbours with ICMPv6 that the kernel sends under no uid; rejecting it would cut
    // boundary's own IPv6 too (ARP, the IPv4 equivalent, never reaches iptables). Without CAP_NET_RAW a
    // workload cannot send these types, so they carry nothing of its own.
    if (tool === 'ip6tables') {
      for (const type of ['neighbour-solicitation', 'neighbour-advertisement']) {
        commands.push([tool, '-w', '-A', 'OUTPUT', '-p', 'ipv6-icmp', '--icmpv6-type', type, '-j', 'ACCEPT']);
      }
    }
    commands.push(
      // A TCP reset is ECONNREFUSED for the caller: a bypass attempt fails at once, not after a timeout.
      [tool, '-w', '-A', 'OUTPUT', '-p', 'tcp', '-j', 'REJECT', '--reject-with', 'tcp-reset'],
      [tool, '-w', '-A', 'OUTPUT', '-j', 'REJECT'],
    );
  }
  return commands;
}

export const initNetnsCommand: Command = async (argv, io) => {
  let cidr = DEFAULT_SYNTHETIC_CIDR;
  let uid = DEFAULT_BOUNDARY_UID;
  let fence = true;
  let dryRun = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      io.stdout.write(HELP);
      return 0;
    } else if (arg === '--synthetic-cidr') cidr = argv[++i] ?? '';
    else if (arg === '--boundary-uid') uid = Number(argv[++i]);
    else if (arg === '--no-fence') fence = false;
    else if (arg === '--dry-run') dryRun = true;
    else {
      io.stderr.write(`init-netns: unknown option ${String(arg)} (USAGE)\n${HELP}`);
      return 2;
    }
  }
  if (parseCidr(cidr) === undefined || !Number.isSafeInteger(uid) || uid < 0) {
    io.stderr.write(`init-netns: --synthetic-cidr must be a CIDR and --boundary-uid a uid (USAGE)\n`);
    return 2;
  }
  for (const [file, ...args] of netnsCommands({ cidr, uid, fence })) {
    io.stdout.write(`${[file, ...args].join(' ')}\n`);
    if (!dryRun && file !== undefined) await run(file, args);
  }
  return 0;
};
