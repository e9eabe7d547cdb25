// The image's build of boundary: tsc's output bundled by esbuild into one directory (why:
// docs/benchmarks.md#the-image-runs-a-bundle). Run: node --import tsx scripts/bundle.ts <tsc outDir> <bundle outDir>
// Entries are app/main.js and every *-worker.js (a worker thread's file is started by its URL, so it must stay a file
// of its own); dynamic import()s stay lazily loaded chunks (splitting). The npm packages every sidecar loads at start
// are bundled too (docs/benchmarks.md#the-packages-every-sidecar-loads); every other package loads from node_modules
// when first used, as before.
// Everything lands in <out>/app/, so a worker sits next to the code that starts it (`./parse-worker.js`) and
// `../../proto` and `../../package.json` resolve from there as they do from any folder of the tsc build.

import { readFile, readdir } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

/** The Node major the bundle's syntax must run on: package.json's engines floor. */
const BUNDLE_TARGET = 'node20';

/**
 * Packages every sidecar loads at start, with what they load in turn: in the bundle, minified, instead of some 60
 * files of node_modules each resolved, read and wrapped at start. The CommonJS ones are loaded in src/ by a module
 * `require` (`const require = createRequire(import.meta.url)`), which the plugin below turns into the bundle's own.
 */
export const BUNDLED_PACKAGES: readonly string[] = ['dns-packet', 'js-yaml', 'pino', 'prom-client'];

/** Where the bundled packages are read from: the project's, also for a tsc output outside it (test/harness/stage.ts). */
const PROJECT_NODE_MODULES = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules');

/** The one form of a module `require` in src/ that the bundle may take over (tsc keeps the line as written). */
const MODULE_REQUIRE = 'const require = createRequire(import.meta.url);';

/** Every chunk's own `require`, for the CommonJS code in it: ES modules have none. */
const REQUIRE_BANNER = "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";

/** The package a bare specifier names: `pino`, `prom-client/lib/gauge` -> `prom-client`, `@scope/name/x` -> `@scope/name`. */
const packageOf = (specifier: string): string => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');

/**
 * Bundles BUNDLED_PACKAGES and what they import, leaves every other package external. In boundary's own files, a
 * module `require` is removed so that esbuild sees the requires of bundled packages; a require of any other package
 * there stays a call made at run time, through the banner's `require`.
 */
const startupPackages: Plugin = {
  name: 'boundary-startup-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return undefined;
      const fromPackage = args.importer.includes(`${sep}node_modules${sep}`);
      return fromPackage || BUNDLED_PACKAGES.includes(packageOf(args.path)) ? undefined : { path: args.path, external: true };
    });
    b.onLoad({ filter: /\.js$/ }, async (args) => {
      if (args.path.includes(`${sep}node_modules${sep}`)) return undefined;
      const text = await readFile(args.path, 'utf8');
      return text.includes(MODULE_REQUIRE) ? { contents: text.replace(MODULE_REQUIRE, ''), loader: 'js' } : undefined;
    });
  },
};

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
    plugins: [startupPackages],
    nodePaths: [PROJECT_NODE_MODULES],
    banner: { js: REQUIRE_BANNER },
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
