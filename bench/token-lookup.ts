// Per-request cost of a token grant's key against a static key: credentialHead (scope, resolve, substitute) on a
// request carrying a placeholder, interleaved rounds, medians. Run: node --import tsx bench/token-lookup.ts
import { credentialHead } from '../src/chain/credential-injection.js';
import { Secret } from '../src/credentials/secret.js';
import { createStaticCredentialSource } from '../src/credentials/source.js';

const ROUNDS = 15;
const PER_ROUND = 50_000;
const token = `eyJ${'a'.repeat(600)}`;
const endpoints = [{ host: 'api.example.test', port: 443 }];
const grant = {
  key: 'TOKEN',
  grantType: 'client_credentials' as const,
  tokenEndpoint: 'https://auth.example.test/token',
  clientId: 'c',
  clientSecret: new Secret('s'),
  clientAuth: 'client_secret_basic' as const,
  privateTokenEndpoint: false,
};
const cases = {
  static: createStaticCredentialSource({ providers: [{ name: 'p', env: { TOKEN: token }, endpoints }] }),
  grant: createStaticCredentialSource({ providers: [{ name: 'p', env: { TOKEN: token }, endpoints, grants: [grant] }] }),
  placement: createStaticCredentialSource({ providers: [{ name: 'p', env: { TOKEN: token }, endpoints, grants: [{ ...grant, placement: { kind: 'bearer' } }] }] }),
};
function run(source: (typeof cases)['static'], placeholder: boolean): number {
  const headers = placeholder ? ['host', 'api.example.test', 'authorization', 'Bearer openshell:resolve:env:TOKEN'] : ['host', 'api.example.test'];
  const start = process.hrtime.bigint();
  for (let i = 0; i < PER_ROUND; i++) {
    const r = credentialHead({ source, host: 'api.example.test', port: 443, method: 'GET', target: '/v1/x', headers, endpoint: undefined });
    if (!r.ok) throw new Error(r.reason);
  }
  return Number(process.hrtime.bigint() - start) / PER_ROUND;
}
const times: Record<string, number[]> = { static: [], grant: [], placement: [] };
for (let round = 0; round < ROUNDS; round++) {
  times.static?.push(run(cases.static, true));
  times.grant?.push(run(cases.grant, true));
  times.placement?.push(run(cases.placement, false));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
for (const [name, xs] of Object.entries(times)) console.log(`${name}: median ${median(xs).toFixed(0)} ns per request head`);
