// Evaluates the tunnelling classifier (src/dns/tunnel-detect.ts) on a corpus: hostname-exfiltration names shaped like
// iodine, dnscat2 and dns2tcp traffic and generic encoders, made from seeded random bytes, against benign CDN, cloud and
// cluster names. Prints the catch rate, the false-positive rate and every miss and false positive.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLookupGate, MAX_NEW_NAMES_PER_PARENT } from '../../src/net/lookup-gate.js';
import { classifySubdomain, subdomainUnder } from '../../src/net/tunnel-detect.js';
import { decide } from '../../src/policy/decide.js';
import { testClock } from '../harness/clock.js';
import { stubPolicy } from '../harness/dns-policy.js';
import { fakeResolver } from '../harness/fake-resolver.js';
import { type Random, seeded } from '../harness/seeded.js';

interface Case {
  readonly category: string;
  readonly name: string;
  /** The base of the wildcard a policy would grant for it (`*.cloudfront.net` -> cloudfront.net). */
  readonly base: string;
}

const MAX_NAME_CHARS = 253;
const MAX_LABEL_CHARS = 63;

function bytes(random: Random, n: number): Buffer {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(random() * 256);
  return out;
}
function pick<T>(random: Random, list: readonly T[]): T {
  return list[Math.floor(random() * list.length)] as T;
}
function chars(random: Random, alphabet: string, n: number): string {
  let out = '';
  for (let i = 0; i < n; i++) out += alphabet[Math.floor(random() * alphabet.length)];
  return out;
}
function between(random: Random, lo: number, hi: number): number {
  return lo + Math.floor(random() * (hi - lo + 1));
}

/** RFC 4648 base32 (lower case, no padding), or another 32-character alphabet (iodine's). */
function base32(data: Buffer, alphabet = 'abcdefghijklmnopqrstuvwxyz234567'): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of data) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}
const ENCODERS: Readonly<Record<string, (data: Buffer) => string>> = {
  hex: (data) => data.toString('hex'),
  base32: (data) => base32(data),
  // DNS folds case, so base64url reaches the resolver lower-cased.
  base64url: (data) => data.toString('base64url').toLowerCase(),
};

/** Splits encoded data into labels of `width` (or random widths in [min, max]) and appends the suffix, within 253. */
function chunked(random: Random, data: string, suffix: string, min: number, max: number): string {
  const labels: string[] = [];
  let rest = data;
  let room = MAX_NAME_CHARS - suffix.length - 1;
  while (rest.length > 0 && room > 1) {
    const width = Math.min(between(random, min, max), rest.length, room - 1);
    labels.push(rest.slice(0, width));
    rest = rest.slice(width);
    room -= width + 1;
  }
  return `${labels.join('.')}.${suffix}`;
}

const ZONES = ['t.attacker.example', 'x.cdn-assets.example', 'ns.tunnel.example'];

function exfiltrationCases(random: Random): Case[] {
  const cases: Case[] = [];
  const add = (category: string, name: string, zone: string) => {
    const base = zone.slice(zone.indexOf('.') + 1);
    cases.push({ category, name, base });
  };
  for (let i = 0; i < 40; i++) {
    const zone = pick(random, ZONES);
    // iodine upstream: a command char, user id and sequence, then its own base32 of the data, a dot every 57 chars.
    const header = `${pick(random, ['0', '1', '2', '3'])}${chars(random, 'abcdefghijklmnopqrstuvwxyz012345', 4)}`;
    add('iodine-base32', chunked(random, header + base32(bytes(random, between(random, 60, 140)), 'abcdefghijklmnopqrstuvwxyz012345'), zone, 57, 57), zone);
    // dnscat2: a 9-byte header plus data, hex, in labels of up to 63, sometimes behind its `dnscat.` tag.
    const packet = bytes(random, 9 + between(random, 16, 100)).toString('hex');
    add('dnscat2-hex', chunked(random, `${random() < 0.5 ? 'dnscat' : ''}${packet}`, zone, 63, 63).replace(/^dnscat/, 'dnscat.'), zone);
    // dns2tcp: a resource label, then the base64 of the data (case folded by DNS).
    add('dns2tcp-base64', chunked(random, bytes(random, between(random, 40, 150)).toString('base64url').toLowerCase(), `ssh.${zone}`, 63, 63), zone);
  }
  for (const [encoding, encode] of Object.entries(ENCODERS)) {
    for (let i = 0; i < 40; i++) {
      const zone = pick(random, ZONES);
      add(`${encoding}-single-label`, `${encode(bytes(random, between(random, 24, 31))).slice(0, MAX_LABEL_CHARS)}.${zone}`, zone);
      add(`${encoding}-chunked`, chunked(random, encode(bytes(random, between(random, 32, 150))), zone, 16, 63), zone);
      add(`${encoding}-chain`, chunked(random, encode(bytes(random, between(random, 40, 120))), zone, 6, 12), zone);
    }
  }
  return cases;
}

/** Control traffic of the tools: a few bytes per name. Shape cannot tell these apart; the lookup gate's volume window can. */
function smallCases(random: Random): Case[] {
  const cases: Case[] = [];
  for (let i = 0; i < 30; i++) {
    const zone = pick(random, ZONES);
    const base = zone.slice(zone.indexOf('.') + 1);
    cases.push({ category: 'dnscat2-poll', name: `${bytes(random, between(random, 9, 16)).toString('hex')}.${zone}`, base });
    cases.push({ category: 'iodine-ping', name: `p${chars(random, 'abcdefghijklmnopqrstuvwxyz012345', between(random, 6, 12))}.${zone}`, base });
  }
  return cases;
}

const REGIONS = ['us-east-1', 'us-west-2', 'eu-west-1', 'eu-central-1', 'ap-southeast-2', 'ap-northeast-1', 'sa-east-1'];
const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
const HEX_DIGITS = '0123456789abcdef';
const BUCKETS = [
  'my-bucket-name', 'company-prod-assets', 'cdk-hnb659fds-assets-123456789012-us-east-1', 'elasticbeanstalk-us-west-2-123456789012',
  'aws-cloudtrail-logs-123456789012-3f2a9c1d', 'terraform-state-prod-eu-west-1', 'my-company-production-data-lake-raw-zone-eu-west-1-123456',
  'amplify-myapp-dev-12345-deployment', 'sagemaker-us-east-1-123456789012', 'codepipeline-us-east-1-123456789012',
  'aws-glue-assets-123456789012-us-east-1', 'cf-templates-1a2b3c4d5e6f-us-east-1', 'serverless-deployments-bucket-abc123',
  'athena-query-results-123456789012', 'static.example.com', 'github-production-release-asset-2e65be', 'nodejs-release-mirror',
  'ml-training-data-2024', 'company-backups-daily', 'prod-logs-archive-cold',
];
const WORDS = ['api', 'www', 'docs', 'login', 'static', 'cdn', 'assets', 'auth', 'registry', 'mail', 'status', 'billing', 'uploads', 'media', 'graphql', 'search', 'events', 'metrics', 'dashboard', 'support'];
const SERVICES = ['my-svc.my-namespace', 'kube-dns.kube-system', 'redis-master.cache', 'postgres-0.postgres.db', 'api-gateway.prod', 'prometheus-server.monitoring', 'argocd-repo-server.argocd', 'istiod.istio-system', '_grpc._tcp.payments.prod', '10-244-1-15.default.pod'];

function benignCases(random: Random): Case[] {
  const cases: Case[] = [];
  const add = (category: string, name: string, base: string) => cases.push({ category, name, base });
  for (let i = 0; i < 20; i++) {
    const region = pick(random, REGIONS);
    add('cloudfront', `d${chars(random, LOWER_ALNUM, 13)}.cloudfront.net`, 'cloudfront.net');
    add('apigateway', `${chars(random, LOWER_ALNUM, 10)}.execute-api.${region}.amazonaws.com`, 'amazonaws.com');
    add('lambda-url', `${chars(random, LOWER_ALNUM, 32)}.lambda-url.${region}.on.aws`, 'on.aws');
    add('eks', `${chars(random, HEX_DIGITS, 32)}.gr7.${region}.eks.amazonaws.com`, 'amazonaws.com');
    add('r2', `${chars(random, HEX_DIGITS, 32)}.r2.cloudflarestorage.com`, 'cloudflarestorage.com');
    add('elb-k8s', `a${chars(random, HEX_DIGITS, 31)}-${chars(random, '0123456789', 10)}.${region}.elb.amazonaws.com`, 'amazonaws.com');
    add('appsync', `${chars(random, LOWER_ALNUM, 26)}.appsync-api.${region}.amazonaws.com`, 'amazonaws.com');
    add('iot', `${chars(random, LOWER_ALNUM, 14)}-ats.iot.${region}.amazonaws.com`, 'amazonaws.com');
    add('vpce', `vpce-0${chars(random, HEX_DIGITS, 16)}-${chars(random, LOWER_ALNUM, 8)}.s3.${region}.vpce.amazonaws.com`, 'amazonaws.com');
    add('rds', `mydb-${pick(random, WORDS)}.${chars(random, LOWER_ALNUM, 12)}.${region}.rds.amazonaws.com`, 'amazonaws.com');
    add('uuid', `${uuid(random)}.tenants.example.com`, 'tenants.example.com');
    add('azure-blob', `st${chars(random, LOWER_ALNUM, 13)}.blob.core.windows.net`, 'core.windows.net');
    add('azure-frontdoor', `${pick(random, WORDS)}-${chars(random, 'abcdefghijklmnopqrstuvwxyz', 16)}.z01.azurefd.net`, 'azurefd.net');
    add('cloud-run', `${pick(random, WORDS)}-service-${chars(random, LOWER_ALNUM, 10)}-uc.a.run.app`, 'run.app');
    add('supabase', `${chars(random, 'abcdefghijklmnopqrstuvwxyz', 20)}.supabase.co`, 'supabase.co');
    add('heroku', `${pick(random, WORDS)}-app-${chars(random, HEX_DIGITS, 12)}.herokuapp.com`, 'herokuapp.com');
    add('googlevideo', `rr${between(random, 1, 5)}---sn-${chars(random, LOWER_ALNUM, 8)}.googlevideo.com`, 'googlevideo.com');
    add('sentry', `o${chars(random, '0123456789', 6)}.ingest.us.sentry.io`, 'sentry.io');
  }
  for (const bucket of BUCKETS) {
    const region = pick(random, REGIONS);
    add('s3-virtual-host', `${bucket}.s3.${region}.amazonaws.com`, 'amazonaws.com');
    add('s3-virtual-host', `${bucket}.s3.dualstack.${region}.amazonaws.com`, 'amazonaws.com');
    add('s3-virtual-host', `${bucket}.s3.amazonaws.com`, 's3.amazonaws.com');
    add('gcs', `${bucket.replaceAll('.', '-')}.storage.googleapis.com`, 'googleapis.com');
  }
  for (const host of ['raw', 'avatars', 'objects', 'user-images', 'camo', 'private-user-images', 'media', 'release-assets']) {
    add('githubusercontent', `${host}.githubusercontent.com`, 'githubusercontent.com');
  }
  for (const api of ['storage', 'www', 'oauth2', 'compute', 'us-central1-aiplatform', 'generativelanguage', 'artifactregistry', 'pubsub', 'bigquery', 'logging']) {
    add('googleapis', `${api}.googleapis.com`, 'googleapis.com');
  }
  for (const service of SERVICES) add('k8s-service', `${service}.svc.cluster.local`, 'cluster.local');
  for (const word of WORDS) add('words', `${word}.example.com`, 'example.com');
  for (const name of [
    '123456789012.dkr.ecr.us-east-1.amazonaws.com', 'my-alb-1234567890.us-east-1.elb.amazonaws.com', 'myregistry.azurecr.io',
    'myvault-prod.vault.azure.net', 'myfunc-abc123def456.azurewebsites.net', 'my-app-git-feature-branch-myteam.vercel.app',
    'e12345.a.akamaiedge.net', 'a1234.dscg.akamai.net', 'dualstack.f3.shared.global.fastly.net', 'my-project-12345.firebaseapp.com',
    'my-cluster.abc123.0001.use1.cache.amazonaws.com', 'this-is-a-very-long-but-legit-hostname-label-for-a-marketing-site.example.com',
    'http-intake.logs.datadoghq.com', 'production.cloudflare.docker.com', 'registry-1.docker.io', 'files.pythonhosted.org',
  ]) {
    add('cloud-misc', name, name.split('.').slice(-2).join('.'));
  }
  return cases;
}

/** A version-4 UUID from the seeded generator. */
function uuid(random: Random): string {
  const h = chars(random, HEX_DIGITS, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${pick(random, ['8', '9', 'a', 'b'])}${h.slice(17, 20)}-${h.slice(20)}`;
}

function flagged(c: Case): boolean {
  const sub = subdomainUnder(c.name, c.base);
  assert.ok(sub !== '', `${c.name} is under ${c.base}`);
  return classifySubdomain(sub).length > 0;
}

function report(title: string, cases: readonly Case[], hit: (c: Case) => boolean): { rate: number; odd: Case[] } {
  const byCategory = new Map<string, [number, number]>();
  const odd: Case[] = [];
  for (const c of cases) {
    const row = byCategory.get(c.category) ?? [0, 0];
    row[0]++;
    if (hit(c)) row[1]++;
    else odd.push(c);
    byCategory.set(c.category, row);
  }
  const rate = (cases.length - odd.length) / cases.length;
  const rows = [...byCategory].map(([category, [n, k]]) => `  ${category.padEnd(20)} ${String(k).padStart(4)}/${String(n).padEnd(4)}`);
  console.log(`${title}: ${(rate * 100).toFixed(1)}% of ${cases.length}\n${rows.join('\n')}`);
  return { rate, odd };
}

describe('tunnelling classifier corpus', () => {
  const random = seeded(0x16_7e57);
  const exfiltration = exfiltrationCases(random);
  const small = smallCases(random);
  const benign = benignCases(random);

  it('flags at least 95% of exfiltration names carrying 24 bytes or more', () => {
    const { rate, odd } = report('catch rate (flagged / exfiltration names)', exfiltration, flagged);
    for (const c of odd) console.log(`  missed ${c.category}: ${c.name}`);
    assert.ok(rate >= 0.95, `catch rate ${rate}`);
  });

  it('flags at most 2% of benign CDN, cloud and cluster names', () => {
    const { rate, odd } = report('benign names passed (1 - false-positive rate)', benign, (c) => !flagged(c));
    for (const c of odd) console.log(`  false positive ${c.category}: ${c.name} ${classifySubdomain(subdomainUnder(c.name, c.base)).join(',')}`);
    console.log(`false-positive rate: ${((1 - rate) * 100).toFixed(1)}% of ${benign.length}`);
    assert.ok(1 - rate <= 0.02, `false-positive rate ${1 - rate}`);
  });

  it('leaves small control names to the per-parent window, which flags every one past MAX_NEW_NAMES_PER_PARENT', () => {
    const { rate } = report('small control names flagged by shape alone', small, flagged);
    assert.ok(rate <= 0.05, 'a 9-byte poll looks like a cloud id');
    const zone = 't.attacker.example';
    const policy = stubPolicy([{ host: `*.${zone}`, ports: [443] }]);
    const gate = createLookupGate({ resolver: fakeResolver(), now: testClock().now, report: () => {}, tunnelDetection: 'enforce' });
    const polls = seeded(2);
    const stream = Array.from({ length: 2 * MAX_NEW_NAMES_PER_PARENT }, () => ({ name: `${bytes(polls, between(polls, 9, 16)).toString('hex')}.${zone}` }));
    let refused = 0;
    for (const c of stream) {
      const endpoints = decide(policy, { adapter: 'dns', host: c.name, form: 'name', qtype: 'A' }).endpoints;
      if ('refused' in gate.lookup(c.name, { endpoints, via: 'dns' })) refused++;
    }
    console.log(`small control names under one parent: ${refused} of ${stream.length} refused in enforce mode (the first ${MAX_NEW_NAMES_PER_PARENT} pass)`);
    assert.equal(refused, stream.length - MAX_NEW_NAMES_PER_PARENT);
  });
});
