// The reverse canary's search alone (docs/benchmarks.md#reverse-canary-and-secret-scanner): matcher.find on a 4 KiB
// chat-style JSON body holding no secret, by number of watched values (random, no shared prefix: the worst case), and
// the secret scanner's evaluateBody on the same body. In process, rounds of BATCH calls; medians of the rounds.
//   node --import tsx bench/canary-search.ts
//   COUNTS=1,4,8,64 ROUNDS=15 BATCH=2000 node --import tsx bench/canary-search.ts

import { randomBytes } from 'node:crypto';
import { createCanaryMatcher } from '../src/credentials/canary.js';
import { createCredentialSet } from '../src/credentials/set.js';
import { createSecretScan } from '../src/middleware/secret-scan.js';
import type { MiddlewareEntry } from '../src/policy/types.js';

const COUNTS = (process.env.COUNTS ?? '1,2,4,8,16,64').split(',').map(Number);
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const BATCH = Number(process.env.BATCH ?? 2000);

const content = 'Summarise the attached incident notes and list follow-ups with owners. '.repeat(60);
const body = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }).slice(0, 4096));

function medianMicros(run: () => void): number {
  for (let i = 0; i < BATCH; i++) run();
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const started = performance.now();
    for (let i = 0; i < BATCH; i++) run();
    rounds.push(((performance.now() - started) * 1000) / BATCH);
  }
  return [...rounds].sort((a, b) => a - b)[Math.floor(rounds.length / 2)] as number;
}

console.log(`${body.length}-byte body, ${ROUNDS} rounds x ${BATCH} calls, median µs per call`);
for (const count of COUNTS) {
  const env = Object.fromEntries(Array.from({ length: count }, (_, i) => [`TOKEN_${i}`, randomBytes(24).toString('base64url')]));
  const matcher = createCanaryMatcher(createCredentialSet({ providers: [{ name: 'bench', env, endpoints: [{ host: 'elsewhere.test', port: 443 }] }], revision: 1 }));
  console.log(`reverse canary, ${count} values: ${medianMicros(() => matcher.find(body)).toFixed(2)}`);
}
const scan = createSecretScan({ key: 'scan', config: {} } as unknown as MiddlewareEntry);
console.log(`secret scan (built-in set, block): ${medianMicros(() => scan.evaluateBody(body)).toFixed(2)}`);
