// Reads the shipped Kubernetes manifests into the few pod fields the pod end-to-end test emulates. A field
// it cannot emulate (a valueFrom other than fieldRef, a volume kind, a dnsPolicy, a container field it does not
// know) throws, so a manifest change is either run by the test or fails it, never skipped over. Env values and
// args are given as the kubelet hands them over: fieldRefs resolved, `$(VAR)` expanded (k8s-expand.ts).

import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { expandVars, type PodMeta, podField } from './k8s-expand.js';

export interface EnvVar {
  readonly name: string;
  readonly value: string;
}

export interface VolumeMount {
  readonly name: string;
  readonly mountPath: string;
  readonly readOnly: boolean;
}

export interface HttpProbe {
  readonly path: string;
  /** Resolved from a named container port. */
  readonly port: number;
}

export interface SecurityContext {
  readonly runAsUser: number;
  readonly runAsGroup: number | undefined;
  readonly runAsNonRoot: boolean;
  readonly allowPrivilegeEscalation: boolean;
  readonly addCaps: readonly string[];
  readonly dropAll: boolean;
}

export interface Container {
  readonly name: string;
  readonly args: readonly string[];
  readonly env: readonly EnvVar[];
  readonly volumeMounts: readonly VolumeMount[];
  readonly security: SecurityContext;
  /** 'Always' on an init container makes it a native sidecar. */
  readonly restartPolicy: string | undefined;
  readonly startupProbe: HttpProbe | undefined;
  readonly readinessProbe: HttpProbe | undefined;
  readonly livenessProbe: HttpProbe | undefined;
}

export type Volume =
  | { readonly name: string; readonly kind: 'secret' | 'configMap'; readonly source: string; readonly items: readonly { key: string; path: string }[] | undefined }
  | { readonly name: string; readonly kind: 'emptyDir' }
  /** A claim's volume outlives the pod's containers: the test keeps one directory for it across restarts. */
  | { readonly name: string; readonly kind: 'persistentVolumeClaim'; readonly claimName: string }
  /** An inline CSI volume: its driver fills it when the pod starts (k8s-csi-cert.ts emulates cert-manager's). */
  | { readonly name: string; readonly kind: 'csi'; readonly driver: string; readonly readOnly: boolean; readonly attributes: Readonly<Record<string, string>> };

/** The pod's metadata (what fieldRefs and a CSI driver read) and the spec fields the test emulates. */
export interface PodSpec extends PodMeta {
  readonly dnsPolicy: 'ClusterFirst' | 'None';
  readonly dnsConfig: { readonly nameservers: readonly string[]; readonly searches: readonly string[]; readonly options: readonly string[] };
  readonly initContainers: readonly Container[];
  readonly containers: readonly Container[];
  readonly volumes: readonly Volume[];
  /** securityContext.sysctls: the kubelet applies them in the pod's namespaces before any container starts. */
  readonly sysctls: readonly EnvVar[];
  /** securityContext.fsGroup: owns claim volumes (setgid) and is a supplementary group of every container. */
  readonly fsGroup: number | undefined;
  /** One PID namespace for every container. The test's processes share the host's, which is what true gives. */
  readonly shareProcessNamespace: boolean;
}

export interface Manifests {
  /** Pods by name: kind Pod as written, and each Deployment's pod template (named after the Deployment). */
  readonly pods: ReadonlyMap<string, PodSpec>;
  /** Every document, for the checks that read other kinds (Service, NetworkPolicy). */
  readonly documents: readonly Record<string, unknown>[];
}

export type Raw = Record<string, unknown>;

const CONTAINER_FIELDS = new Set([
  'name', 'image', 'args', 'env', 'ports', 'volumeMounts', 'securityContext', 'resources', 'restartPolicy',
  'startupProbe', 'readinessProbe', 'livenessProbe',
]);
const POD_FIELDS = new Set([
  'dnsPolicy', 'dnsConfig', 'initContainers', 'containers', 'volumes', 'securityContext', 'automountServiceAccountToken', 'enableServiceLinks',
  'shareProcessNamespace',
]);

export function fail(where: string, message: string): never {
  throw new Error(`${where}: ${message} (the pod test cannot emulate this; extend test/harness/k8s-manifest.ts)`);
}

export function asRecord(value: unknown, where: string): Raw {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(where, 'expected a mapping');
  return value as Raw;
}

export function asList(value: unknown, where: string): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail(where, 'expected a list');
  return value;
}

function parseProbe(raw: unknown, ports: ReadonlyMap<string, number>, where: string): HttpProbe | undefined {
  if (raw === undefined) return undefined;
  const http = asRecord(asRecord(raw, where).httpGet, `${where}.httpGet`);
  const port = typeof http.port === 'number' ? http.port : ports.get(String(http.port));
  if (port === undefined || typeof http.path !== 'string') fail(where, 'expected httpGet with a path and a known port');
  return { path: http.path, port };
}

function parseSecurity(raw: unknown, where: string): SecurityContext {
  const sc = raw === undefined ? {} : asRecord(raw, where);
  const caps = sc.capabilities === undefined ? {} : asRecord(sc.capabilities, `${where}.capabilities`);
  const drop = asList(caps.drop, `${where}.capabilities.drop`).map(String);
  if (drop.some((c) => c !== 'ALL')) fail(where, 'only capabilities.drop: [ALL] is emulated');
  if (typeof sc.runAsUser !== 'number') fail(where, 'runAsUser must be set (the test runs each container as its uid)');
  return {
    runAsUser: sc.runAsUser,
    runAsGroup: typeof sc.runAsGroup === 'number' ? sc.runAsGroup : undefined,
    runAsNonRoot: sc.runAsNonRoot === true,
    allowPrivilegeEscalation: sc.allowPrivilegeEscalation !== false,
    addCaps: asList(caps.add, `${where}.capabilities.add`).map(String),
    dropAll: drop.includes('ALL'),
  };
}

/** The env as the kubelet sets it: fieldRefs from the pod's metadata, `$(VAR)` from the entries before. */
function parseEnv(raw: unknown, meta: PodMeta, where: string): EnvVar[] {
  const vars = new Map<string, string>();
  return asList(raw, where).map((e, i) => {
    const entry = asRecord(e, `${where}[${i}]`);
    const name = String(entry.name);
    let value: string;
    if (entry.valueFrom !== undefined) {
      const from = asRecord(entry.valueFrom, `${where}[${i}].valueFrom`);
      if (Object.keys(from).join() !== 'fieldRef') fail(`${where}[${i}].valueFrom`, 'only fieldRef');
      value = podField(meta, String(asRecord(from.fieldRef, `${where}[${i}].valueFrom.fieldRef`).fieldPath), `${where}[${i}]`);
    } else {
      if (entry.value !== undefined && typeof entry.value !== 'string') fail(`${where}[${i}]`, 'a value must be a string');
      value = expandVars(entry.value ?? '', vars);
    }
    vars.set(name, value);
    return { name, value };
  });
}

function parseContainer(raw: unknown, where: string, meta: PodMeta): Container {
  const c = asRecord(raw, where);
  for (const key of Object.keys(c)) if (!CONTAINER_FIELDS.has(key)) fail(`${where}.${key}`, 'unknown container field');
  if (c.command !== undefined) fail(where, 'command (the image entrypoint is what runs)');
  const ports = new Map<string, number>();
  for (const p of asList(c.ports, `${where}.ports`)) {
    const port = asRecord(p, `${where}.ports`);
    if (typeof port.name === 'string' && typeof port.containerPort === 'number') ports.set(port.name, port.containerPort);
  }
  const env = parseEnv(c.env, meta, `${where}.env`);
  const vars = new Map(env.map((e) => [e.name, e.value]));
  const volumeMounts = asList(c.volumeMounts, `${where}.volumeMounts`).map((m, i) => {
    const mount = asRecord(m, `${where}.volumeMounts[${i}]`);
    if (mount.subPath !== undefined) fail(`${where}.volumeMounts[${i}]`, 'subPath');
    return { name: String(mount.name), mountPath: String(mount.mountPath), readOnly: mount.readOnly === true };
  });
  return {
    name: String(c.name),
    args: asList(c.args, `${where}.args`).map((a) => expandVars(String(a), vars)),
    env,
    volumeMounts,
    security: parseSecurity(c.securityContext, `${where}.securityContext`),
    restartPolicy: typeof c.restartPolicy === 'string' ? c.restartPolicy : undefined,
    startupProbe: parseProbe(c.startupProbe, ports, `${where}.startupProbe`),
    readinessProbe: parseProbe(c.readinessProbe, ports, `${where}.readinessProbe`),
    livenessProbe: parseProbe(c.livenessProbe, ports, `${where}.livenessProbe`),
  };
}

function parseVolume(raw: unknown, where: string): Volume {
  const v = asRecord(raw, where);
  const name = String(v.name);
  const items = (source: Raw) =>
    source.items === undefined ? undefined : asList(source.items, `${where}.items`).map((i) => ({ key: String(asRecord(i, where).key), path: String(asRecord(i, where).path) }));
  if (v.secret !== undefined) {
    const s = asRecord(v.secret, `${where}.secret`);
    return { name, kind: 'secret', source: String(s.secretName), items: items(s) };
  }
  if (v.configMap !== undefined) {
    const s = asRecord(v.configMap, `${where}.configMap`);
    return { name, kind: 'configMap', source: String(s.name), items: items(s) };
  }
  if (v.emptyDir !== undefined) return { name, kind: 'emptyDir' };
  if (v.persistentVolumeClaim !== undefined) {
    const claim = asRecord(v.persistentVolumeClaim, `${where}.persistentVolumeClaim`);
    if (claim.readOnly !== undefined) fail(`${where}.persistentVolumeClaim.readOnly`, 'claim field');
    return { name, kind: 'persistentVolumeClaim', claimName: String(claim.claimName) };
  }
  if (v.csi !== undefined) {
    const csi = asRecord(v.csi, `${where}.csi`);
    for (const key of Object.keys(csi)) if (!['driver', 'readOnly', 'volumeAttributes'].includes(key)) fail(`${where}.csi.${key}`, 'csi field');
    const attributes = asRecord(csi.volumeAttributes ?? {}, `${where}.csi.volumeAttributes`);
    return { name, kind: 'csi', driver: String(csi.driver), readOnly: csi.readOnly === true, attributes: Object.fromEntries(Object.entries(attributes).map(([k, a]) => [k, String(a)])) };
  }
  return fail(where, 'volume kind');
}

/** A pod spec as the kubelet runs it for a pod with this metadata. */
export function parsePod(meta: PodMeta, rawSpec: unknown, where: string): PodSpec {
  const spec = asRecord(rawSpec, where);
  for (const key of Object.keys(spec)) if (!POD_FIELDS.has(key)) fail(`${where}.${key}`, 'unknown pod field');
  const dnsPolicy = spec.dnsPolicy ?? 'ClusterFirst';
  if (dnsPolicy !== 'ClusterFirst' && dnsPolicy !== 'None') fail(`${where}.dnsPolicy`, `dnsPolicy ${String(dnsPolicy)}`);
  const dns = spec.dnsConfig === undefined ? {} : asRecord(spec.dnsConfig, `${where}.dnsConfig`);
  const options = asList(dns.options, `${where}.dnsConfig.options`).map((o) => {
    const option = asRecord(o, `${where}.dnsConfig.options`);
    return option.value === undefined ? String(option.name) : `${String(option.name)}:${String(option.value)}`;
  });
  const podSecurity = spec.securityContext === undefined ? {} : asRecord(spec.securityContext, `${where}.securityContext`);
  for (const key of Object.keys(podSecurity)) if (!['seccompProfile', 'sysctls', 'fsGroup'].includes(key)) fail(`${where}.securityContext.${key}`, 'pod security field');
  const sysctls = asList(podSecurity.sysctls, `${where}.securityContext.sysctls`).map((entry) => {
    const sysctl = asRecord(entry, `${where}.securityContext.sysctls`);
    return { name: String(sysctl.name), value: String(sysctl.value) };
  });
  return {
    ...meta,
    sysctls,
    fsGroup: podSecurity.fsGroup === undefined ? undefined : Number(podSecurity.fsGroup),
    shareProcessNamespace: spec.shareProcessNamespace === true,
    dnsPolicy,
    dnsConfig: { nameservers: asList(dns.nameservers, where).map(String), searches: asList(dns.searches, where).map(String), options },
    initContainers: asList(spec.initContainers, `${where}.initContainers`).map((c, i) => parseContainer(c, `${where}.initContainers[${i}]`, meta)),
    containers: asList(spec.containers, `${where}.containers`).map((c, i) => parseContainer(c, `${where}.containers[${i}]`, meta)),
    volumes: asList(spec.volumes, `${where}.volumes`).map((v, i) => parseVolume(v, `${where}.volumes[${i}]`)),
  };
}

/** A string map (labels, annotations) as written, or empty. */
export function stringMap(raw: unknown, where: string): Record<string, string> {
  return Object.fromEntries(Object.entries(asRecord(raw ?? {}, where)).map(([k, v]) => [k, String(v)]));
}

/** The metadata a pod named `name` gets from `meta` (a Pod's own, or a template's); the API server assigns its uid. */
export function podMeta(name: string, namespace: string, meta: Raw, where: string): PodMeta {
  return {
    name,
    namespace,
    uid: randomUUID(),
    labels: stringMap(meta.labels, `${where}.labels`),
    annotations: stringMap(meta.annotations, `${where}.annotations`),
    serviceAccountName: 'default',
  };
}

/** Every `*.yaml` document of the given files in `dir`. */
export async function readManifests(dir: string, files: readonly string[]): Promise<Manifests> {
  const pods = new Map<string, PodSpec>();
  const documents: Raw[] = [];
  for (const file of files) {
    const text = await readFile(join(dir, file), 'utf8');
    for (const [index, doc] of parseAllDocuments(text).entries()) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
      const raw = asRecord(doc.toJS(), `${file}#${index}`);
      documents.push(raw);
      const meta = asRecord(raw.metadata ?? {}, `${file}#${index}.metadata`);
      const name = String(meta.name);
      const namespace = typeof meta.namespace === 'string' ? meta.namespace : 'default';
      if (raw.kind === 'Pod') pods.set(name, parsePod(podMeta(name, namespace, meta, file), raw.spec, `${file}:${name}.spec`));
      if (raw.kind === 'Deployment') {
        const template = asRecord(asRecord(raw.spec, file).template, `${file}:${name}.spec.template`);
        pods.set(name, parsePod(podMeta(name, namespace, asRecord(template.metadata ?? {}, file), file), template.spec, `${file}:${name}.spec.template.spec`));
      }
    }
  }
  return { pods, documents };
}

export function container(pod: PodSpec, name: string): Container {
  const found = [...pod.initContainers, ...pod.containers].find((c) => c.name === name);
  if (found === undefined) throw new Error(`${pod.name} has no container ${name}`);
  return found;
}
