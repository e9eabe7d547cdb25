// The Agent Sandbox controller's side of a SandboxTemplate and a SandboxWarmPool (extensions.agents.x-k8s.io/v1beta1),
// as far as the pod tests need it: their fields checked against the controller's schema (an unknown field or value
// throws), and the pod the controllers make from a template for a Sandbox. That pod is named after the Sandbox (a
// SandboxClaim's name on a cold start, the warm pool's generated name otherwise), carries the template's labels and
// annotations but never the controller's reserved ones, and gets the controller's secure defaults. Nothing else of
// the template is rewritten: the Sandbox's name reaches the containers only through the pod's own name.

import { randomInt } from 'node:crypto';
import { asList, asRecord, fail, type Manifests, type PodSpec, parsePod, podMeta, type Raw } from './k8s-manifest.js';

export const SANDBOX_TEMPLATE_API_VERSION = 'extensions.agents.x-k8s.io/v1beta1';
/** The label every sandbox pod carries: an FNV-1a hash of the Sandbox's name (its headless Service selects it). */
export const SANDBOX_NAME_HASH_LABEL = 'agents.x-k8s.io/sandbox-name-hash';
const RESERVED_PREFIXES = ['agents.x-k8s.io/', 'extensions.agents.x-k8s.io/'];
const SPEC_ENUMS: Readonly<Record<string, readonly string[]>> = {
  networkPolicyManagement: ['Managed', 'Unmanaged'],
  envVarsInjectionPolicy: ['Allowed', 'Overrides', 'Disallowed'],
  volumeClaimTemplatesPolicy: ['Allowed', 'Overrides', 'Disallowed'],
};
const SPEC_FIELDS = new Set(['podTemplate', 'volumeClaimTemplates', 'service', 'networkPolicy', ...Object.keys(SPEC_ENUMS)]);
const POOL_FIELDS = new Set(['replicas', 'sandboxTemplateRef', 'updateStrategy']);
const POOL_UPDATE_STRATEGIES = ['Recreate', 'OnReplenish'];
/** The API server's generateName suffix: five characters from an alphabet without vowels or look-alikes. */
const GENERATED_SUFFIX_CHARS = 'bcdfghjklmnpqrstvwxz2456789';
const GENERATED_SUFFIX_LENGTH = 5;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

export interface NetworkPolicyRules {
  readonly ingress: readonly Raw[];
  readonly egress: readonly Raw[];
}

export interface SandboxTemplate {
  readonly name: string;
  readonly namespace: string;
  readonly networkPolicyManagement: 'Managed' | 'Unmanaged';
  /** The rules of the one NetworkPolicy the controller keeps for a Managed template; undefined: its default. */
  readonly networkPolicy: NetworkPolicyRules | undefined;
  readonly envVarsInjectionPolicy: string;
  readonly podMetadata: Raw;
  readonly podSpec: Raw;
}

export interface SandboxWarmPool {
  readonly name: string;
  readonly templateName: string;
}

function nameHash(name: string): string {
  let hash = FNV_OFFSET;
  for (const byte of Buffer.from(name, 'utf8')) hash = Math.imul(hash ^ byte, FNV_PRIME) >>> 0;
  return hash.toString(16).padStart(8, '0');
}

function parseTemplate(raw: Raw, where: string): SandboxTemplate {
  if (raw.apiVersion !== SANDBOX_TEMPLATE_API_VERSION) fail(where, `apiVersion ${String(raw.apiVersion)} (the test follows ${SANDBOX_TEMPLATE_API_VERSION})`);
  const meta = asRecord(raw.metadata ?? {}, `${where}.metadata`);
  const spec = asRecord(raw.spec, `${where}.spec`);
  for (const key of Object.keys(spec)) if (!SPEC_FIELDS.has(key)) fail(`${where}.spec.${key}`, 'not a SandboxTemplate field');
  for (const [key, values] of Object.entries(SPEC_ENUMS)) {
    if (spec[key] !== undefined && !values.includes(String(spec[key]))) fail(`${where}.spec.${key}`, `one of ${values.join(', ')}`);
  }
  if (asList(spec.volumeClaimTemplates, `${where}.spec.volumeClaimTemplates`).length > 0) fail(`${where}.spec.volumeClaimTemplates`, 'claims per sandbox');
  const podTemplate = asRecord(spec.podTemplate, `${where}.spec.podTemplate`);
  for (const key of Object.keys(podTemplate)) if (key !== 'metadata' && key !== 'spec') fail(`${where}.spec.podTemplate.${key}`, 'podTemplate has metadata and spec only');
  const podMetadata = asRecord(podTemplate.metadata ?? {}, `${where}.spec.podTemplate.metadata`);
  for (const key of Object.keys(podMetadata)) if (key !== 'labels' && key !== 'annotations') fail(`${where}.spec.podTemplate.metadata.${key}`, 'only labels and annotations are used');
  let networkPolicy: NetworkPolicyRules | undefined;
  if (spec.networkPolicy !== undefined) {
    const rules = asRecord(spec.networkPolicy, `${where}.spec.networkPolicy`);
    for (const key of Object.keys(rules)) if (key !== 'ingress' && key !== 'egress') fail(`${where}.spec.networkPolicy.${key}`, 'the controller sets the selector and policy types');
    const ruleList = (key: string) => asList(rules[key], `${where}.spec.networkPolicy.${key}`).map((r) => asRecord(r, `${where}.spec.networkPolicy.${key}`));
    networkPolicy = { ingress: ruleList('ingress'), egress: ruleList('egress') };
  }
  return {
    name: String(meta.name),
    namespace: typeof meta.namespace === 'string' ? meta.namespace : 'default',
    networkPolicyManagement: spec.networkPolicyManagement === 'Unmanaged' ? 'Unmanaged' : 'Managed',
    networkPolicy,
    envVarsInjectionPolicy: typeof spec.envVarsInjectionPolicy === 'string' ? spec.envVarsInjectionPolicy : 'Disallowed',
    podMetadata,
    podSpec: asRecord(podTemplate.spec, `${where}.spec.podTemplate.spec`),
  };
}

function parseWarmPool(raw: Raw, where: string): SandboxWarmPool {
  if (raw.apiVersion !== SANDBOX_TEMPLATE_API_VERSION) fail(where, `apiVersion ${String(raw.apiVersion)} (the test follows ${SANDBOX_TEMPLATE_API_VERSION})`);
  const spec = asRecord(raw.spec, `${where}.spec`);
  for (const key of Object.keys(spec)) if (!POOL_FIELDS.has(key)) fail(`${where}.spec.${key}`, 'not a SandboxWarmPool field');
  if (spec.replicas !== undefined && (!Number.isInteger(spec.replicas) || Number(spec.replicas) < 0)) fail(`${where}.spec.replicas`, 'a count');
  const ref = asRecord(spec.sandboxTemplateRef, `${where}.spec.sandboxTemplateRef`);
  for (const key of Object.keys(ref)) if (key !== 'name') fail(`${where}.spec.sandboxTemplateRef.${key}`, 'a template is named only');
  const strategy = asRecord(spec.updateStrategy ?? {}, `${where}.spec.updateStrategy`);
  for (const key of Object.keys(strategy)) if (key !== 'type') fail(`${where}.spec.updateStrategy.${key}`, 'not an update strategy field');
  if (strategy.type !== undefined && !POOL_UPDATE_STRATEGIES.includes(String(strategy.type))) fail(`${where}.spec.updateStrategy.type`, `one of ${POOL_UPDATE_STRATEGIES.join(', ')}`);
  return { name: String(asRecord(raw.metadata ?? {}, `${where}.metadata`).name), templateName: String(ref.name) };
}

/** Every SandboxTemplate and SandboxWarmPool among the documents, each by name. */
export function agentSandboxObjects(manifests: Manifests): { templates: Map<string, SandboxTemplate>; pools: Map<string, SandboxWarmPool> } {
  const templates = new Map<string, SandboxTemplate>();
  const pools = new Map<string, SandboxWarmPool>();
  for (const doc of manifests.documents) {
    const where = `${String(doc.kind)} ${String(asRecord(doc.metadata ?? {}, 'metadata').name)}`;
    if (doc.kind === 'SandboxTemplate') {
      const template = parseTemplate(doc, where);
      templates.set(template.name, template);
    } else if (doc.kind === 'SandboxWarmPool') {
      const pool = parseWarmPool(doc, where);
      pools.set(pool.name, pool);
    }
  }
  return { templates, pools };
}

/** The name a pool's next Sandbox gets: `<pool>-` and the API server's generated suffix. */
export function warmSandboxName(pool: SandboxWarmPool): string {
  const suffix = Array.from({ length: GENERATED_SUFFIX_LENGTH }, () => GENERATED_SUFFIX_CHARS[randomInt(GENERATED_SUFFIX_CHARS.length)]).join('');
  return `${pool.name}-${suffix}`;
}

/**
 * The pod the controllers create for the Sandbox `sandboxName` made from `template`. The controller's secure
 * defaults would point a Managed template without rules at public resolvers and a NetworkPolicy that blocks the
 * cluster's own addresses: such a template throws here, since its boundary could never reach its supervisor.
 */
export function sandboxPod(template: SandboxTemplate, sandboxName: string): PodSpec {
  const where = `SandboxTemplate ${template.name}`;
  if (template.networkPolicyManagement === 'Managed' && template.networkPolicy === undefined) {
    fail(where, "the controller's default NetworkPolicy admits public addresses only and its DNS default is public resolvers: the cluster DNS and the supervisor are unreachable");
  }
  const meta = podMeta(sandboxName, template.namespace, template.podMetadata, `${where}.spec.podTemplate.metadata`);
  const unreserved = (map: Readonly<Record<string, string>>) => Object.fromEntries(Object.entries(map).filter(([key]) => !RESERVED_PREFIXES.some((p) => key.startsWith(p))));
  return parsePod(
    { ...meta, labels: { ...unreserved(meta.labels), [SANDBOX_NAME_HASH_LABEL]: nameHash(sandboxName) }, annotations: unreserved(meta.annotations) },
    // The controller's default: no ServiceAccount token unless the template asks for one.
    { automountServiceAccountToken: false, ...template.podSpec },
    `${where}.spec.podTemplate.spec`,
  );
}
