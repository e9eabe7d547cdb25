// The soak's other hostile classes: WebSocket floods (a burst of allowed messages, a text message where policy
// allows none: close 1008, a fragment storm past MAX_MESSAGE_FRAGMENTS: close 1009), a DNS flood of allowed and
// refused names at a fixed rate (soak-dns-flood.ts; NOERROR / NXDOMAIN / REFUSED past the rate limit, nothing else), and policy rewrites and
// credential rotations, each of which must load. Loopback only.

import { MAX_MESSAGE_FRAGMENTS, OPCODES } from '../../src/websocket/ws-frames.js';
import { withinDeadline } from '../harness/waiters.js';
import { openWebSocket, type WsClient } from '../harness/ws.js';
import { startDnsFlood } from './soak-dns-flood.js';
import { attemptInto, hostileTally, type HostileTally, type Phase, recordOutcome, repeatWaves } from './soak-hostile.js';
import { SOAK_HOSTS, type SoakStack } from './soak-stack.js';

/** Messages in one flood burst, written back to back before any echo is read. */
export const WS_FLOOD_MESSAGES = 200;
const WS_FLOOD_INTERVAL_MS = 1_000;
/**
 * The flood's rate. Every query is two audit lines the child writes and the test parses: on 2 cores a higher rate
 * measures the log pipe, not the boundary. The long form uses the same rate for longer.
 */
export const DNS_FLOOD_QPS = 400;
/** Refused names in the flood's input, beside the allowed ones: two refused queries for each allowed one. */
const DNS_REFUSED_NAMES = 64;
const DNS_ALLOWED_NAMES = [SOAK_HOSTS.plain, SOAK_HOSTS.tls, SOAK_HOSTS.ws, SOAK_HOSTS.tunnel] as const;
export const POLICY_RELOAD_INTERVAL_MS = 1_000;
export const CREDENTIAL_ROTATION_INTERVAL_MS = 700;
/**
 * Bounds a hang only: a rewrite not loaded (settle window plus parse) within this counts as not applied, a close
 * frame not seen as not sent. A loaded host stretches both far past their usual moment.
 */
const LOAD_DEADLINE_MS = 30_000;
const WS_DEADLINE_MS = 30_000;

async function openWs(stack: SoakStack, path: string, opened: Set<WsClient>): Promise<WsClient> {
  const ws = await openWebSocket({ proxyPort: stack.proxyPort, transport: 'forward', host: SOAK_HOSTS.ws, port: stack.ports.ws, path });
  opened.add(ws.client);
  if (ws.status !== 101) throw new Error(`upgrade answered ${ws.status}`);
  return ws.client;
}

async function wsFlood(stack: SoakStack, opened: Set<WsClient>): Promise<{ ok: boolean; sample: string }> {
  const client = await openWs(stack, '/socket', opened);
  try {
    for (let i = 0; i < WS_FLOOD_MESSAGES; i++) client.sendText(`flood-${i}`);
    let echoed = 0;
    // Bounded by the message count; next() rejects on close or after its own timeout.
    for (let i = 0; i < WS_FLOOD_MESSAGES; i++) if ((await client.next()).payload.toString('utf8') === `echo:flood-${i}`) echoed++;
    return { ok: echoed === WS_FLOOD_MESSAGES, sample: `${echoed} of ${WS_FLOOD_MESSAGES} echoed in order` };
  } finally {
    client.socket.destroy();
  }
}

async function wsCloseCode(stack: SoakStack, path: string, send: (client: WsClient) => void, expected: number, opened: Set<WsClient>): Promise<{ ok: boolean; sample: string }> {
  const client = await openWs(stack, path, opened);
  try {
    send(client);
    const code = await withinDeadline(client.closeCode(), `close frame on ${path}`, WS_DEADLINE_MS);
    return { ok: code === expected, sample: `close ${code}` };
  } finally {
    client.socket.destroy();
  }
}

function fragmentStorm(client: WsClient): void {
  client.sendFrame(OPCODES.text, Buffer.from('f'), false);
  for (let i = 0; i < MAX_MESSAGE_FRAGMENTS; i++) client.sendFrame(OPCODES.continuation, Buffer.from('f'), false);
}

export interface OtherHostiles {
  readonly tallies: HostileTally[];
  readonly done: Promise<void>;
  destroy(): void;
}

export async function startOtherHostiles(stack: SoakStack, phase: Phase, seconds: number): Promise<OtherHostiles> {
  const opened = new Set<WsClient>();
  const t = {
    flood: hostileTally('ws-flood', `${WS_FLOOD_MESSAGES} messages relayed in order`),
    text: hostileTally('ws-text-denied', 'close 1008'),
    storm: hostileTally('ws-fragment-storm', 'close 1009'),
    dns: hostileTally('dns-flood', 'NOERROR allowed, NXDOMAIN refused (REFUSED past the refusal rate limit), nothing else'),
    reload: hostileTally('policy-reload', 'loaded as a new generation'),
    rotate: hostileTally('credential-rotation', 'loaded as a new revision'),
  };
  // Two refused names for each allowed one, cycled in this order.
  const allowed = DNS_ALLOWED_NAMES.flatMap((name) => Array.from({ length: DNS_REFUSED_NAMES / DNS_ALLOWED_NAMES.length / 2 }, () => name));
  const names = [...allowed, ...Array.from({ length: DNS_REFUSED_NAMES }, (_, i) => `refused-${i}.soak.test`)];
  const flood = await startDnsFlood({ port: stack.dnsPort, dir: stack.dir, names, seconds, qps: DNS_FLOOD_QPS });
  const dnsFlood = flood.done.then((summary) => {
    t.dns.note = `${summary.tool}: sent ${summary.sent}, answered ${summary.completed}, lost ${summary.lost}, ${JSON.stringify(summary.rcodes)}`;
    // REFUSED is the answer to refused names past the refusal rate limit (docs/dns.md#rate-limits); the steady
    // clients' own lookups of allowed names are checked one by one (soak-steady.ts) and must stay NOERROR.
    const others = Object.keys(summary.rcodes).filter((rcode) => rcode !== 'NOERROR' && rcode !== 'NXDOMAIN' && rcode !== 'REFUSED');
    const ok = summary.error === undefined && (summary.rcodes.NOERROR ?? 0) > 0 && (summary.rcodes.NXDOMAIN ?? 0) > 0 && others.length === 0;
    recordOutcome(t.dns, ok, summary.error === undefined ? `rcodes ${JSON.stringify(summary.rcodes)}` : `${summary.tool} failed: ${summary.error}`);
  });
  let rewrite = 0;
  let rotation = 0;
  const done = Promise.all([
    dnsFlood,
    repeatWaves(phase, WS_FLOOD_INTERVAL_MS, async () => {
      await attemptInto(t.flood, () => wsFlood(stack, opened));
      await attemptInto(t.text, () => wsCloseCode(stack, '/no-text', (c) => c.sendText('not allowed here'), 1008, opened));
      await attemptInto(t.storm, () => wsCloseCode(stack, '/socket', fragmentStorm, 1009, opened));
    }),
    repeatWaves(phase, POLICY_RELOAD_INTERVAL_MS, () =>
      attemptInto(t.reload, async () => {
        const n = ++rewrite;
        const loaded = stack.boundary.next((line) => (line.ocsf?.message ?? '').startsWith('policy loaded from') && Number(line.ocsf?.unmapped?.policy_generation) >= n + 1, LOAD_DEADLINE_MS, `policy generation ${n + 1}`);
        await stack.writePolicy(n);
        await loaded;
        return { ok: true, sample: '' };
      }),
    ),
    repeatWaves(phase, CREDENTIAL_ROTATION_INTERVAL_MS, () =>
      attemptInto(t.rotate, async () => {
        const n = ++rotation;
        const loaded = stack.boundary.next((line) => line.ocsf?.status_detail === 'credentials_loaded' && Number(line.ocsf?.unmapped?.credential_revision) >= n + 1, LOAD_DEADLINE_MS, `credential revision ${n + 1}`);
        await stack.writeCredentials(n);
        await loaded;
        return { ok: true, sample: '' };
      }),
    ),
  ]).then(() => undefined);
  return {
    tallies: Object.values(t),
    done,
    destroy() {
      flood.stop();
      for (const client of opened) client.socket.destroy();
    },
  };
}
