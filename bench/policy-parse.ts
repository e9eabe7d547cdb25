// Policy parse benchmark: parsePolicy on test/harness/large-policy.ts policies (1,000 and 10,000 endpoints),
// wall and CPU time, medians of interleaved rounds; with BOUNDARY_REF, the same against a committed build, in turn
// in one process so both see the same machine. No sockets.
//   node --import tsx bench/policy-parse.ts
//   BOUNDARY_REF=2a67c62 ROUNDS=7 node --import tsx bench/policy-parse.ts
// The build of BOUNDARY_REF is compiled into bench/out/build-<sha>/ by bench/build-ref.sh.

import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { largePolicyText } from '../test/harness/large-policy.js';

type Parse = (text: string) => { readonly hash: string };

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const SIZES = (process.env.SIZES ?? '1000,10000').split(',').map(Number);

async function parserAt(dist: string): Promise<Parse> {
  return ((await import(pathToFileURL(join(dist, 'policy', 'parse.js')).href)) as { parsePolicy: Parse }).parsePolicy;
}

function buildRef(ref: string): string {
  return execFileSync(join(ROOT, 'bench', 'build-ref.sh'), [ref], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

function measure(parse: Parse, text: string): { wall: number; cpu: number; hash: string } {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const { hash } = parse(text);
  const wall = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { wall, cpu: (used.user + used.system) / 1_000, hash };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

const current = await parserAt(join(ROOT, 'dist'));
const ref = process.env.BOUNDARY_REF;
const parsers: [string, Parse][] = [['working tree (dist/)', current]];
if (ref !== undefined) parsers.unshift([ref, await parserAt(buildRef(ref))]);

for (const endpoints of SIZES) {
  const text = largePolicyText({ endpoints });
  const samples = parsers.map(() => ({ wall: [] as number[], cpu: [] as number[] }));
  for (let round = 0; round < ROUNDS; round++) {
    let hash: string | undefined;
    parsers.forEach(([name, parse], i) => {
      const m = measure(parse, text);
      if (hash !== undefined && m.hash !== hash) throw new Error(`${name} hashes the policy differently`);
      hash = m.hash;
      samples[i]?.wall.push(m.wall);
      samples[i]?.cpu.push(m.cpu);
    });
  }
  for (const [i, [name]] of parsers.entries()) {
    const s = samples[i];
    if (s === undefined) continue;
    console.log(`${endpoints} endpoints (${text.length} bytes), ${name}: wall ${median(s.wall).toFixed(0)} ms, CPU ${median(s.cpu).toFixed(0)} ms (medians of ${ROUNDS})`);
  }
}
