// The image's build of boundary: tsc's output bundled by esbuild into one directory (why:
// docs/benchmarks.md#the-image-runs-a-bundle). Run: node --import tsx scripts/bundle.ts <tsc outDir> <bundle outDir>
// Entries are app/main.js and every *-worker.js (a worker thread's file is started by its URL, so it must stay a file
// of its own); dynamic import()s stay lazily loaded chunks (splitting); npm packages load from node_modules as before.
// Everything lands in <out>/app/, so a worker sits next to the code that starts it (`./parse-worker.js`) and
// `../../proto` and `../../package.json` resolve from there as they do from any folder of the tsc build.

import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

/** The Node major the bundle's syntax must run on: package.json's engines floor. */
const BUNDLE_TARGET = 'node20';

export async function bundleBoundary(tscOut: string, bundleOut: string): Promise<void> {
  const workers = (await readdir(tscOut, { recursive: true })).filter((file) => file.endsWith('-worker.js'));
  await build({
    absWorkingDir: resolve(tscOut),
    entryPoints: [join('app', 'main.js'), ...workers],
    outdir: resolve(bundleOut, 'app'),
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: BUNDLE_TARGET,
    packages: 'external',
    // Minified for memory: V8 keeps every module's source text in its heap. Stack traces name the TypeScript
    // sources with NODE_OPTIONS=--enable-source-maps (the map chains tsc's own).
    minify: true,
    sourcemap: 'linked',
    entryNames: '[name]',
    chunkNames: 'chunk-[hash]',
    logLevel: 'warning',
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [tscOut, bundleOut] = process.argv.slice(2);
  if (tscOut === undefined || bundleOut === undefined) throw new Error('usage: scripts/bundle.ts <tsc outDir> <bundle outDir>');
  await bundleBoundary(tscOut, bundleOut);
}
