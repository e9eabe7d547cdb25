// The workload's trust bundle (`--ca-bundle-out`): system roots, the `--upstream-ca` anchors and the
// interception CA in one PEM file, for clients whose CA setting *replaces* their roots (SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO, CURL_CA_BUNDLE). Finds the roots and writes the file; never reads env.

import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { nodeRootsWith } from '../shared/node-tls.js';
import { CERT_FILE_MODE, ensureDir, writeFileAtomic } from './files.js';
import { BoundaryError } from '../shared/errors.js';

/** The default file name beside ca.pem in the state directory. */
export const CA_BUNDLE_FILE = 'ca-bundle.pem';
/** Debian, Ubuntu and Alpine keep the OpenSSL default bundle here; it is tried before asking openssl. */
const OPENSSL_DEFAULT_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
/** `openssl version -d` answers in milliseconds; a hung binary must not hold up the start. */
const OPENSSL_QUERY_TIMEOUT_MS = 2_000;
export const NODE_ROOTS_SOURCE = "Node's built-in roots (tls.rootCertificates)";

const PEM_CERTIFICATES = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

interface SystemRoots {
  readonly certificates: readonly string[];
  /** Where they came from: a file path, or NODE_ROOTS_SOURCE. */
  readonly source: string;
}

/** The CERTIFICATE blocks of PEM text. Anything else (a private key pasted alongside) is left out. */
export function certificateBlocks(pem: string): string[] {
  return pem.match(PEM_CERTIFICATES) ?? [];
}

/** OPENSSLDIR as the installed `openssl` binary reports it, or undefined when there is none. */
function opensslDir(): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('openssl', ['version', '-d'], { timeout: OPENSSL_QUERY_TIMEOUT_MS }, (err, stdout) => {
      resolve(err === null ? /OPENSSLDIR: "([^"]+)"/.exec(stdout)?.[1] : undefined);
    });
  });
}

async function certificatesIn(path: string): Promise<string[]> {
  try {
    return certificateBlocks(await readFile(path, 'utf8'));
  } catch {
    return [];
  }
}

/**
 * The roots the workload's own TLS stack trusts: the OpenSSL default bundle if readable (the Debian path,
 * else `<OPENSSLDIR>/cert.pem`), else Node's built-in list. `query` replaces the openssl call in tests.
 */
export async function loadSystemRoots(options: { candidates?: readonly string[]; query?: () => Promise<string | undefined> } = {}): Promise<SystemRoots> {
  for (const path of options.candidates ?? [OPENSSL_DEFAULT_BUNDLE]) {
    const certificates = await certificatesIn(path);
    if (certificates.length > 0) return { certificates, source: path };
  }
  // Asked only when the usual path is missing: distroless images have neither the file nor the binary.
  const dir = await (options.query ?? opensslDir)();
  if (dir !== undefined) {
    const path = join(dir, 'cert.pem');
    const certificates = await certificatesIn(path);
    if (certificates.length > 0) return { certificates, source: path };
  }
  return { certificates: nodeRootsWith(undefined), source: NODE_ROOTS_SOURCE };
}

interface TrustBundleInput {
  readonly system: SystemRoots;
  /** The `--upstream-ca` file: its path and text. */
  readonly upstream?: { readonly path: string; readonly pem: string } | undefined;
  readonly ca: { readonly certPem: string; readonly subject: string };
}

// A comment is one line: a path with a newline in it would otherwise start a line of its own.
function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f]/g, '?');
}

function countText(n: number): string {
  return n === 1 ? '1 certificate' : `${n} certificates`;
}

function group(comment: string, certificates: readonly string[]): string {
  return `# ${oneLine(comment)}\n${certificates.map((c) => `${c.trim()}\n`).join('')}\n`;
}

/** The bundle text: a comment line before each group. PEM readers skip text outside BEGIN/END lines. */
export function buildTrustBundle(input: TrustBundleInput): string {
  const { system, upstream, ca } = input;
  const upstreamBlocks = upstream === undefined ? [] : certificateBlocks(upstream.pem);
  return [
    '# boundary workload trust bundle: rewritten by `boundary run` on every start; edits are lost.\n\n',
    group(`System roots: ${countText(system.certificates.length)} from ${system.source}`, system.certificates),
    upstream === undefined ? '' : group(`Upstream trust anchors from --upstream-ca ${upstream.path}: ${countText(upstreamBlocks.length)}`, upstreamBlocks),
    group(`boundary interception CA (${ca.subject}): signs the certificates of inspected TLS`, certificateBlocks(ca.certPem)),
  ].join('');
}

/** Writes through a temporary file and a rename, mode 0644: the file only ever appears complete. */
export async function writeCaBundle(path: string, text: string): Promise<void> {
  await ensureDir(dirname(path));
  await writeFileAtomic(path, text, CERT_FILE_MODE);
}

/**
 * Loads the system roots, builds the bundle and writes it to `path`; returns what went into it, for the event
 * that says where the roots came from (`N system roots from ... + the interception CA`); a failed write is CONFIG_INVALID.
 */
export async function writeWorkloadTrustBundle(path: string, input: Omit<TrustBundleInput, 'system'>): Promise<string> {
  const system = await loadSystemRoots();
  try {
    await writeCaBundle(path, buildTrustBundle({ ...input, system }));
  } catch (err) {
    throw new BoundaryError('CONFIG_INVALID', `cannot write --ca-bundle-out ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
  }
  const anchors = input.upstream === undefined ? '' : ` + ${certificateBlocks(input.upstream.pem).length} from --upstream-ca`;
  return `${system.certificates.length} system roots from ${system.source}${anchors} + the interception CA`;
}
