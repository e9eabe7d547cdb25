// cert-manager's csi-driver (driver csi.cert-manager.io) as the pod tests need it: a pod's inline volume attributes
// read with the driver's defaults and its ${POD_NAME}-style variables, a key pair made for the pod and signed by
// the CA issuer the attributes name (openssl stands in for cert-manager's CA issuer), and the files as the driver
// lays them out: mode 0440 in a 0550 directory, owned by root and the fs-group attribute's group. An attribute it
// does not emulate, or that the driver does not know, throws.

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { PodSpec, Volume } from './k8s-manifest.js';

export const CSI_CERT_MANAGER = 'csi.cert-manager.io';
const PREFIX = `${CSI_CERT_MANAGER}/`;
/** What the driver writes: files readable by owner and group, a directory they may only enter. */
const FILE_MODE = 0o440;
const DIR_MODE = 0o550;
const DAY_MS = 86_400_000;
const DEFAULTS: Readonly<Record<string, string>> = {
  'issuer-kind': 'Issuer',
  'issuer-group': 'cert-manager.io',
  duration: '2160h',
  'ca-file': 'ca.crt',
  'certificate-file': 'tls.crt',
  'privatekey-file': 'tls.key',
  'key-usages': 'digital signature,key encipherment',
  'key-algorithm': 'RSA',
};
const KEY_DEFAULTS: Readonly<Record<string, { encoding: string; size: string }>> = { RSA: { encoding: 'PKCS1', size: '2048' }, ECDSA: { encoding: 'PKCS8', size: '256' } };
const EMULATED = new Set([...Object.keys(DEFAULTS), 'issuer-name', 'common-name', 'dns-names', 'uri-sans', 'key-size', 'key-encoding', 'fs-group', 'renew-before', 'reuse-private-key']);
const NOT_EMULATED = new Set(['literal-subject', 'organizations', 'organizationalunits', 'countries', 'provinces', 'localities', 'streetaddresses', 'postalcodes', 'serialnumber', 'ip-sans', 'is-ca', 'pkcs12-enable', 'pkcs12-filename', 'pkcs12-password']);
const KEY_USAGES: Readonly<Record<string, string>> = { 'digital signature': 'digitalSignature', 'key encipherment': 'keyEncipherment', 'key agreement': 'keyAgreement', 'content commitment': 'nonRepudiation', 'data encipherment': 'dataEncipherment' };
const EXT_KEY_USAGES: Readonly<Record<string, string>> = { 'client auth': 'clientAuth', 'server auth': 'serverAuth', 'code signing': 'codeSigning', 'email protection': 'emailProtection' };
const EC_CURVES: Readonly<Record<string, string>> = { '256': 'P-256', '384': 'P-384', '521': 'P-521' };
const GO_DURATION_UNIT_MS: Readonly<Record<string, number>> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };

const run = promisify(execFile);

/** A cert-manager CA issuer's signing material (the Secret its `spec.ca.secretName` names). */
export interface CaIssuer {
  readonly certFile: string;
  readonly keyFile: string;
}

/** What a CSI driver leaves in a volume when the pod starts. */
export interface CsiContent {
  readonly files: Readonly<Record<string, string>>;
  readonly fileMode: number;
  readonly dirMode: number;
  /** The group that owns the directory and files (root's when undefined). */
  readonly gid: number | undefined;
}

export type CsiVolume = Extract<Volume, { kind: 'csi' }>;
export type CsiDriver = (volume: CsiVolume, pod: PodSpec) => Promise<CsiContent>;

function fail(volume: CsiVolume, message: string): never {
  throw new Error(`volume ${volume.name} (${CSI_CERT_MANAGER}): ${message}`);
}

/** Go's os.Expand over the variables the driver defines; any other variable is an error, as in the driver. */
function expand(volume: CsiVolume, pod: PodSpec, text: string): string {
  const vars: Readonly<Record<string, string>> = { POD_NAME: pod.name, POD_NAMESPACE: pod.namespace, POD_UID: pod.uid, SERVICE_ACCOUNT_NAME: pod.serviceAccountName };
  return text.replace(/\$(?:\{([^}]*)\}|([A-Za-z0-9_]+)|(.?))/g, (_, braced?: string, bare?: string, other?: string) => {
    const name = braced ?? bare ?? other ?? '';
    const value = vars[name];
    if (value === undefined) fail(volume, `undefined variable "${name}" in "${text}"`);
    return value;
  });
}

const list = (csv: string | undefined): string[] => (csv ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');

function durationMs(volume: CsiVolume, text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) fail(volume, `"${text}" is not a duration`);
  return parts.reduce((sum, p) => sum + Number(p[1]) * (GO_DURATION_UNIT_MS[p[2] ?? ''] ?? 0), 0);
}

/** The attributes with the driver's defaults applied, checked as the driver checks them. */
function attributes(volume: CsiVolume): Record<string, string> {
  if (volume.driver !== CSI_CERT_MANAGER) fail(volume, `driver ${volume.driver} is not emulated`);
  // The driver refuses to publish a writable volume.
  if (!volume.readOnly) fail(volume, 'csi.readOnly must be true');
  const attrs: Record<string, string> = {};
  for (const [key, value] of Object.entries(volume.attributes)) {
    const name = key.startsWith(PREFIX) ? key.slice(PREFIX.length) : key;
    if (NOT_EMULATED.has(name)) fail(volume, `${key} is not emulated; extend test/harness/k8s-csi-cert.ts`);
    if (!EMULATED.has(name)) fail(volume, `${key} is not an attribute of the driver`);
    attrs[name] = value;
  }
  for (const [name, value] of Object.entries(DEFAULTS)) if ((attrs[name] ?? '') === '') attrs[name] = value;
  const algorithm = (attrs['key-algorithm'] ?? '').toUpperCase();
  const keyDefaults = KEY_DEFAULTS[algorithm] ?? fail(volume, `key-algorithm ${attrs['key-algorithm']} is not emulated`);
  attrs['key-algorithm'] = algorithm;
  attrs['key-encoding'] = (attrs['key-encoding'] ?? keyDefaults.encoding).toUpperCase();
  attrs['key-size'] ??= keyDefaults.size;
  if ((attrs['issuer-name'] ?? '') === '') fail(volume, 'issuer-name is required');
  for (const name of ['duration', 'renew-before']) if (attrs[name] !== undefined) durationMs(volume, attrs[name]);
  const files = ['ca-file', 'certificate-file', 'privatekey-file'].map((name) => attrs[name] ?? '');
  if (new Set(files).size !== files.length || files.some((f) => f.includes('/'))) fail(volume, `file names must be distinct and plain: ${files.join(', ')}`);
  return attrs;
}

function extensions(volume: CsiVolume, attrs: Record<string, string>, sans: string[], emptySubject: boolean): string {
  const usages = list(attrs['key-usages']);
  const unknown = usages.filter((u) => KEY_USAGES[u] === undefined && EXT_KEY_USAGES[u] === undefined);
  if (unknown.length > 0) fail(volume, `key usages not emulated: ${unknown.join(', ')}`);
  const ku = usages.flatMap((u) => KEY_USAGES[u] ?? []);
  const eku = usages.flatMap((u) => EXT_KEY_USAGES[u] ?? []);
  return [
    'basicConstraints=critical,CA:FALSE',
    ...(ku.length > 0 ? [`keyUsage=critical,${ku.join(',')}`] : []),
    ...(eku.length > 0 ? [`extendedKeyUsage=${eku.join(',')}`] : []),
    // Without a subject the names are the identity, and RFC 5280 makes them critical.
    ...(sans.length > 0 ? [`subjectAltName=${emptySubject ? 'critical,' : ''}${sans.join(',')}`] : []),
    '',
  ].join('\n');
}

async function keyPair(volume: CsiVolume, attrs: Record<string, string>, dir: string): Promise<string> {
  const key = join(dir, 'key.pem');
  const size = attrs['key-size'] ?? '';
  if (attrs['key-algorithm'] === 'ECDSA') {
    const curve = EC_CURVES[size] ?? fail(volume, `ECDSA key-size ${size}`);
    if (attrs['key-encoding'] !== 'PKCS8') fail(volume, 'only rsa keys can use the pkcs1 encoding format');
    await run('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', `ec_paramgen_curve:${curve}`, '-out', key]);
  } else {
    await run('openssl', ['genpkey', '-algorithm', 'RSA', '-pkeyopt', `rsa_keygen_bits:${size}`, '-out', key]);
    if (attrs['key-encoding'] === 'PKCS1') {
      const pkcs1 = join(dir, 'key-pkcs1.pem');
      await run('openssl', ['pkey', '-in', key, '-traditional', '-out', pkcs1]);
      return pkcs1;
    }
  }
  return key;
}

/**
 * The driver for `csi.cert-manager.io` volumes, signing with `issuers` (keyed `<group>/ClusterIssuer/<name>` or
 * `<group>/Issuer/<namespace>/<name>`); its scratch files go under `workDir`.
 */
export function certManagerCsiDriver(issuers: ReadonlyMap<string, CaIssuer>, workDir: string): CsiDriver {
  return async (volume, pod) => {
    const attrs = attributes(volume);
    const kind = attrs['issuer-kind'] ?? '';
    const issuerKey = kind === 'ClusterIssuer' ? `${attrs['issuer-group']}/${kind}/${attrs['issuer-name']}` : `${attrs['issuer-group']}/${kind}/${pod.namespace}/${attrs['issuer-name']}`;
    const issuer = issuers.get(issuerKey) ?? fail(volume, `no CA issuer ${issuerKey} in the manifests`);
    const commonName = attrs['common-name'] === undefined ? '' : expand(volume, pod, attrs['common-name']);
    if (/[/+=,]/.test(commonName)) fail(volume, `common name "${commonName}" is not emulated`);
    const sans = [
      ...list(expand(volume, pod, attrs['dns-names'] ?? '')).map((n) => `DNS:${n}`),
      ...list(expand(volume, pod, attrs['uri-sans'] ?? '')).map((u) => `URI:${u}`),
    ];
    const dir = await mkdtemp(join(workDir, 'csi-'));
    const key = await keyPair(volume, attrs, dir);
    await run('openssl', ['req', '-new', '-key', key, '-subj', commonName === '' ? '/' : `/CN=${commonName}`, '-out', join(dir, 'csr.pem')]);
    await writeFile(join(dir, 'ext.cnf'), extensions(volume, attrs, sans, commonName === ''));
    const days = String(Math.max(1, Math.ceil(durationMs(volume, attrs.duration ?? '') / DAY_MS)));
    const serial = `0x${randomBytes(16).toString('hex')}`;
    await run('openssl', ['x509', '-req', '-sha256', '-in', join(dir, 'csr.pem'), '-CA', issuer.certFile, '-CAkey', issuer.keyFile, '-set_serial', serial, '-days', days, '-extfile', join(dir, 'ext.cnf'), '-out', join(dir, 'cert.pem')]);
    const fsGroup = attrs['fs-group'];
    if (fsGroup !== undefined && !/^\d+$/.test(fsGroup)) fail(volume, `fs-group ${fsGroup} is not an integer`);
    return {
      // A CA issuer's request carries its CA certificate, which the driver writes as the CA file.
      files: {
        [attrs['ca-file'] ?? '']: await readFile(issuer.certFile, 'utf8'),
        [attrs['certificate-file'] ?? '']: await readFile(join(dir, 'cert.pem'), 'utf8'),
        [attrs['privatekey-file'] ?? '']: await readFile(key, 'utf8'),
      },
      fileMode: FILE_MODE,
      dirMode: DIR_MODE,
      gid: fsGroup === undefined ? undefined : Number(fsGroup),
    };
  };
}
