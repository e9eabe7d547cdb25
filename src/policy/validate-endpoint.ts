// Reads one `endpoints[i]` map into a draft endpoint (docs/policy.md#endpoint-fields, docs/policy.md#validation V3-V12, V14). Reports every problem and
// returns undefined when the endpoint has any; parse.ts adds policy-level fields and freezes the result.

import { regionFromHost } from '../net/aws-region.js';
import { CREDENTIAL_SIGNING_MODES, type CredentialSigning } from './types.js';
import { warnCaseSensitiveDenies } from './deny-case.js';
import { readAllowedIps, readCredentialBinding, readProtocolOptions } from './endpoint-options.js';
import { ENDPOINT_KEYS, L7_ONLY_ENDPOINT_KEYS, PROTOCOL_VALUES } from './format.js';
import { compilePathSelector, globError, type PathSelector } from './glob.js';
import { normalisePolicyHost } from './host-pattern.js';
import { compileHostPattern, type HostMatcher } from './match.js';
import { presetRules, readRules } from './rules.js';
import {
  ACCESS_PRESETS,
  type AccessPreset,
  type Endpoint,
  type Enforcement,
  ENFORCEMENTS,
  L7_PROTOCOLS,
  type Protocol,
} from './types.js';
import {
  childPath,
  type Field,
  intAt,
  knownFields,
  type ReadContext,
  readBool,
  readMap,
  readSeq,
  readString,
  report,
  isSeq,
  type Node,
  seqItems,
} from './yaml-source.js';

const MIN_PORT = 1;
export const MAX_PORT = 65535;

/** Everything of an Endpoint that one endpoint map decides, plus what V13 and the index need. */
export type EndpointDraft = Omit<
  Endpoint,
  'id' | 'policy' | 'policyName' | 'index' | 'binaries' | 'order' | 'matchesBinary'
> & {
  readonly matcher: HostMatcher;
  readonly selector: PathSelector;
  readonly node: Node;
  readonly path: string | undefined;
  readonly yamlPath: string;
  readonly canonical: Record<string, unknown>;
};

/** Protocols whose bodies may carry credential placeholders to rewrite (docs/credentials.md): JSON bodies policy reads whole. */
const BODY_REWRITE_PROTOCOLS: ReadonlySet<Protocol> = new Set(['rest', 'mcp', 'json-rpc']);

export function readEndpoint(ctx: ReadContext, node: Node | null, path: string): EndpointDraft | undefined {
  const before = ctx.issues.length;
  const map = readMap(ctx, node, path);
  if (map === undefined) return undefined;
  const f = knownFields(ctx, map, path, ENDPOINT_KEYS);
  const at = (key: string): string => childPath(path, key);
  const valueNode = (key: string): Node | null | undefined => f.get(key)?.value ?? f.get(key)?.keyNode;

  const protocol = readProtocol(ctx, f.get('protocol'), at('protocol'));
  const effective: Protocol = protocol ?? 'l4';
  const tcp = protocol === 'tcp';
  const l7 = L7_PROTOCOLS.has(effective);
  if (tcp) {
    for (const key of L7_ONLY_ENDPOINT_KEYS) {
      const field = f.get(key);
      if (field !== undefined) report(ctx, field.keyNode, at(key), 'POLICY_TCP_L7_FIELD', `protocol tcp does not accept ${key}`);
    }
  }

  const allowedIps = readAllowedIps(ctx, f.get('allowed_ips'), at('allowed_ips'));
  const { host, hostKind } = readHost(ctx, { f, map, path, tcp, hasAllowedIps: allowedIps.length > 0 });

  const ports = readPorts(ctx, f, path, map);
  const selectorText = tcp ? undefined : readString(ctx, f.get('path'), at('path'));
  if (selectorText !== undefined && selectorText !== '') {
    const problem = globError(selectorText) ?? (/^[/*]/.test(selectorText) ? undefined : 'path must start with / or *');
    if (problem !== undefined) report(ctx, valueNode('path'), at('path'), 'POLICY_PATH_INVALID', problem);
  }

  const tls = readTls(ctx, f.get('tls'), at('tls'));
  if (tls === 'skip' && l7) {
    report(ctx, valueNode('tls'), at('tls'), 'POLICY_TLS_WITH_PROTOCOL', `tls: skip cannot be combined with protocol ${effective}`);
  }
  const enforcementText = tcp ? undefined : readString(ctx, f.get('enforcement'), at('enforcement'));
  let enforcement: Enforcement = 'audit';
  if (enforcementText !== undefined) {
    if ((ENFORCEMENTS as readonly string[]).includes(enforcementText)) enforcement = enforcementText as Enforcement;
    else report(ctx, valueNode('enforcement'), at('enforcement'), 'POLICY_ENFORCEMENT_INVALID', 'enforcement must be enforce or audit');
  } else if (l7) {
    report(ctx, map, at('enforcement'), 'POLICY_WARN_AUDIT_DEFAULT',
      'no enforcement set: the default audit logs violations and forwards them anyway');
  }

  const { options, canonical: optionsCanonical } = readProtocolOptions(ctx, f, path, protocol);
  const access = tcp ? undefined : readAccess(ctx, f.get('access'), at('access'), effective);
  const hasRules = f.has('rules');
  const hasDeny = f.has('deny_rules');
  const rules = tcp
    ? { allow: [], deny: [], canonical: { allow: [], deny: [] } }
    : readRules(ctx, f.get('rules'), f.get('deny_rules'), path, {
        protocol: effective,
        mcpAllowAll: options.mcpAllowAllKnownMethods,
        mcpStrictToolNames: options.mcpStrictToolNames,
      });
  checkRuleRequirements(ctx, { map, f, path, effective, protocol, hasRules, hasDeny, options, hostKind });
  if (!tcp) warnCaseSensitiveDenies(ctx, f.get('deny_rules'), path);

  const bools = {
    allowEncodedSlash: readBool(ctx, f.get('allow_encoded_slash'), at('allow_encoded_slash')) ?? false,
    allowEncodedBackslash: readBool(ctx, f.get('allow_encoded_backslash'), at('allow_encoded_backslash')) ?? false,
    allowEncodedNul: readBool(ctx, f.get('allow_encoded_nul'), at('allow_encoded_nul')) ?? false,
    websocketCredentialRewrite: readBool(ctx, f.get('websocket_credential_rewrite'), at('websocket_credential_rewrite')) ?? false,
    requestBodyCredentialRewrite:
      readBool(ctx, f.get('request_body_credential_rewrite'), at('request_body_credential_rewrite')) ?? false,
    allowUninspectedCredentials:
      readBool(ctx, f.get('allow_uninspected_credentials'), at('allow_uninspected_credentials')) ?? false,
  };
  if (bools.websocketCredentialRewrite && !tcp && effective !== 'rest' && effective !== 'websocket') {
    report(ctx, valueNode('websocket_credential_rewrite'), at('websocket_credential_rewrite'), 'POLICY_WEBSOCKET_REWRITE_INVALID',
      'websocket_credential_rewrite is valid on rest and websocket endpoints only');
  }
  if (bools.requestBodyCredentialRewrite && !tcp && !BODY_REWRITE_PROTOCOLS.has(effective)) {
    report(ctx, valueNode('request_body_credential_rewrite'), at('request_body_credential_rewrite'), 'POLICY_BODY_REWRITE_INVALID',
      'request_body_credential_rewrite is valid on rest, mcp and json-rpc endpoints only');
  }
  const signing = readSigning(ctx, f, path, { bodyRewrite: bools.requestBodyCredentialRewrite, host, hostKind, tlsSkip: tls === 'skip' });
  const credentialProvider = readCredentialBinding(ctx, f.get('credential_binding'), at('credential_binding'));
  if (credentialProvider !== undefined && (!l7 || tls === 'skip') && !bools.allowUninspectedCredentials) {
    report(ctx, f.get('credential_binding')?.keyNode, at('credential_binding'), 'POLICY_UNINSPECTED_CREDENTIALS',
      'a credentialed endpoint needs an L7 protocol without tls: skip, or allow_uninspected_credentials: true');
  }

  if (protocol === undefined && (access !== undefined || hasRules)) {
    report(ctx, map, at('protocol'), 'POLICY_WARN_RULES_WITHOUT_PROTOCOL', 'access and rules have no effect without protocol');
  }
  if (ctx.issues.length > before) return undefined;

  const selector = compilePathSelector(selectorText === '' ? undefined : selectorText);
  const allowRules = access === undefined ? rules.allow : presetRules(effective, access);
  return {
    node: map,
    yamlPath: path,
    host,
    hostKind,
    matcher: compileHostPattern(host, hostKind),
    ports,
    protocol: effective,
    tls,
    enforcement,
    path: selectorText === '' ? undefined : selectorText,
    selector,
    selectorSpecificity: selector.specificity,
    selectsPath: selector.matches,
    allowedIps,
    ...bools,
    credentialProvider,
    inspected: l7,
    access,
    rules: allowRules,
    denyRules: rules.deny,
    ...signing,
    options,
    // Keys in sorted order, as canonicalJson writes them: it then has nothing to sort (canonical.ts).
    canonical: {
      access: access ?? null,
      allowEncodedBackslash: bools.allowEncodedBackslash,
      allowEncodedNul: bools.allowEncodedNul,
      allowEncodedSlash: bools.allowEncodedSlash,
      allowUninspectedCredentials: bools.allowUninspectedCredentials,
      allowedIps,
      credentialProvider: credentialProvider ?? null,
      enforcement,
      host: host ?? null,
      options: optionsCanonical,
      path: selectorText === '' ? null : (selectorText ?? null),
      ports,
      protocol: effective,
      requestBodyCredentialRewrite: bools.requestBodyCredentialRewrite,
      rules: rules.canonical,
      signing: { mode: signing.credentialSigning ?? null, region: signing.signingRegion ?? null, service: signing.signingService ?? null },
      tls,
      websocketCredentialRewrite: bools.websocketCredentialRewrite,
    },
  };
}

interface HostInput {
  readonly f: ReadonlyMap<string, Field>;
  readonly map: Node;
  readonly path: string;
  readonly tcp: boolean;
  readonly hasAllowedIps: boolean;
}

/** `host` (V3, V9): the normalised pattern and how it was written; absent only in the hostless allowed_ips form. */
function readHost(ctx: ReadContext, input: HostInput): { host: string | undefined; hostKind: Endpoint['hostKind'] } {
  const { f, map, tcp } = input;
  const path = childPath(input.path, 'host');
  const hostText = readString(ctx, f.get('host'), path);
  if (hostText === undefined) {
    if (f.has('host')) return { host: undefined, hostKind: 'any' };
    if (tcp) report(ctx, map, path, 'POLICY_TCP_HOST', 'protocol tcp needs a DNS hostname');
    // `allowed_ips` entries that failed to parse are reported on their own; only an absent or empty list is this.
    else if (!input.hasAllowedIps && listIsEmpty(f.get('allowed_ips'))) {
      report(ctx, map, path, 'POLICY_HOST_REQUIRED', 'host is required unless allowed_ips is set');
    }
    return { host: undefined, hostKind: 'any' };
  }
  const node = f.get('host')?.value ?? f.get('host')?.keyNode;
  const result = normalisePolicyHost(hostText, { tcp });
  if (!result.ok) {
    report(ctx, node, path, result.code, result.message);
    return { host: undefined, hostKind: 'any' };
  }
  if (result.warning !== undefined) report(ctx, node, path, 'POLICY_WARN_PUBLIC_SUFFIX', result.warning);
  return { host: result.host, hostKind: result.kind };
}

/** Absent, or a list with no items (`allowed_ips: []`). */
function listIsEmpty(field: Field | undefined): boolean {
  if (field === undefined) return true;
  const value = field.value;
  return isSeq(value) && value.items.length === 0;
}

function readProtocol(ctx: ReadContext, field: Field | undefined, path: string): Protocol | undefined {
  const text = readString(ctx, field, path);
  if (text === undefined) return undefined;
  if ((PROTOCOL_VALUES as readonly string[]).includes(text)) return text as Protocol;
  const why = text === 'sql' ? 'sql is not supported: its rules would silently do nothing' : `unknown protocol ${text}`;
  report(ctx, field?.value, path, 'POLICY_PROTOCOL_INVALID', `${why}; use one of ${PROTOCOL_VALUES.join(', ')} or omit it`);
  return undefined;
}

function readPorts(ctx: ReadContext, f: ReadonlyMap<string, Field>, path: string, map: Node): number[] {
  const bounds = { min: MIN_PORT, max: MAX_PORT, code: 'POLICY_PORT_INVALID' as const };
  const portField = f.get('port');
  const portsField = f.get('ports');
  const single = portField === undefined ? undefined : intAt(ctx, portField.value, childPath(path, 'port'), bounds);
  let list: number[] | undefined;
  if (portsField !== undefined) {
    const seq = readSeq(ctx, portsField.value, childPath(path, 'ports'));
    if (seq !== undefined) {
      list = [];
      seqItems(seq).forEach((item, i) => {
        const port = intAt(ctx, item, childPath(childPath(path, 'ports'), i), bounds);
        if (port !== undefined) list?.push(port);
      });
      if (seq.items.length === 0) report(ctx, seq, childPath(path, 'ports'), 'POLICY_PORT_REQUIRED', 'ports: [] lists no port');
    }
    if (portField !== undefined) {
      report(ctx, portsField.keyNode, childPath(path, 'ports'), 'POLICY_WARN_PORT_AND_PORTS', 'both port and ports are set; ports wins');
    }
  }
  if (portField === undefined && portsField === undefined) {
    report(ctx, map, childPath(path, 'port'), 'POLICY_PORT_REQUIRED', 'an endpoint needs port or ports');
  }
  const ports = list ?? (single === undefined ? [] : [single]);
  return [...new Set(ports)].sort((a, b) => a - b);
}

/** `tls`: absent or "" (TLS detected on the first bytes) or `skip`, exactly; OpenShell refuses its old no-op values too. */
function readTls(ctx: ReadContext, field: Field | undefined, path: string): 'auto' | 'skip' {
  const text = readString(ctx, field, path);
  if (text === undefined || text === '') return 'auto';
  if (text === 'skip') return 'skip';
  const why = text === 'terminate' || text === 'passthrough' ? `tls: ${text} is no longer a setting (TLS is detected automatically)` : `unknown tls value ${JSON.stringify(text)}`;
  report(ctx, field?.value, path, 'POLICY_TLS_INVALID', `${why}; omit the field, or write skip for a raw tunnel`);
  return 'auto';
}

function readAccess(ctx: ReadContext, field: Field | undefined, path: string, protocol: Protocol): AccessPreset | undefined {
  const text = readString(ctx, field, path);
  if (text === undefined) return undefined;
  if (!(ACCESS_PRESETS as readonly string[]).includes(text)) {
    report(ctx, field?.value, path, 'POLICY_ACCESS_INVALID', `access must be one of ${ACCESS_PRESETS.join(', ')}`);
    return undefined;
  }
  if (protocol === 'mcp' || protocol === 'json-rpc') {
    report(ctx, field?.value, path, 'POLICY_ACCESS_INVALID', `access presets are not allowed for ${protocol}; write rules`);
    return undefined;
  }
  return text as AccessPreset;
}

interface RequirementInput {
  readonly map: Node;
  readonly f: ReadonlyMap<string, Field>;
  readonly path: string;
  readonly effective: Protocol;
  readonly protocol: Protocol | undefined;
  readonly hasRules: boolean;
  readonly hasDeny: boolean;
  readonly options: { readonly mcpAllowAllKnownMethods: boolean };
  readonly hostKind: Endpoint['hostKind'];
}

/** V5, V7, V8: which protocols need rules, and what deny_rules lean on. */
function checkRuleRequirements(ctx: ReadContext, input: RequirementInput): void {
  const { map, f, path, effective, hasRules, hasDeny } = input;
  // tcp reports its L7 fields elsewhere; an invalid protocol is already reported.
  if (effective === 'tcp' || (f.get('protocol') !== undefined && input.protocol === undefined)) return;
  if (f.has('access') && hasRules) {
    report(ctx, f.get('access')?.keyNode, childPath(path, 'access'), 'POLICY_ACCESS_AND_RULES', 'access and rules are mutually exclusive');
  }
  const hasBase = f.has('access') || hasRules;
  if ((effective === 'rest' || effective === 'websocket' || effective === 'graphql') && !hasBase) {
    report(ctx, map, childPath(path, 'rules'), 'POLICY_RULES_REQUIRED', `protocol ${effective} needs rules or access`);
  }
  const allowAll = effective === 'mcp' && input.options.mcpAllowAllKnownMethods;
  if (hasDeny && (input.protocol === undefined || (!hasBase && !allowAll))) {
    report(ctx, f.get('deny_rules')?.keyNode, childPath(path, 'deny_rules'), 'POLICY_DENY_RULES_REQUIREMENTS',
      input.protocol === undefined ? 'deny_rules need a protocol' : 'deny_rules need rules or access to deny from');
  }
  if (effective === 'json-rpc' && !hasRules) {
    report(ctx, map, childPath(path, 'rules'), 'POLICY_JSON_RPC_INVALID', 'json-rpc endpoints need rules with allow.method');
  }
  if (effective === 'mcp') {
    if (!hasRules && !allowAll) {
      report(ctx, map, childPath(path, 'rules'), 'POLICY_MCP_INVALID', 'mcp needs rules unless mcp.allow_all_known_mcp_methods is true');
    }
    // OpenShell's rule: a host, of any kind (a glob too); `allowed_ips` alone does not make an MCP endpoint.
    if (input.hostKind === 'any') {
      report(ctx, f.get('host')?.value ?? map, childPath(path, 'host'), 'POLICY_MCP_INVALID', 'mcp needs a host: protocol alone is not a wildcard endpoint');
    }
  }
}

function readSigning(
  ctx: ReadContext,
  f: ReadonlyMap<string, Field>,
  path: string,
  on: { readonly bodyRewrite: boolean; readonly host: string | undefined; readonly hostKind: string; readonly tlsSkip: boolean },
): { credentialSigning: CredentialSigning | undefined; signingService: string | undefined; signingRegion: string | undefined } {
  const modeText = readString(ctx, f.get('credential_signing'), childPath(path, 'credential_signing'));
  const signingService = readString(ctx, f.get('signing_service'), childPath(path, 'signing_service'));
  const signingRegion = readString(ctx, f.get('signing_region'), childPath(path, 'signing_region'));
  let credentialSigning: CredentialSigning | undefined;
  if (modeText !== undefined) {
    const node = f.get('credential_signing')?.value;
    if (!(CREDENTIAL_SIGNING_MODES as readonly string[]).includes(modeText)) {
      report(ctx, node, childPath(path, 'credential_signing'), 'POLICY_SIGNING_INVALID',
        `credential_signing must be one of ${CREDENTIAL_SIGNING_MODES.join(', ')}`);
    } else credentialSigning = modeText as CredentialSigning;
    if (signingService === undefined || signingService === '') {
      report(ctx, node, childPath(path, 'credential_signing'), 'POLICY_SIGNING_INVALID', 'credential_signing needs signing_service');
    }
    if (on.bodyRewrite) {
      report(ctx, node, childPath(path, 'credential_signing'), 'POLICY_SIGNING_INVALID',
        'credential_signing and request_body_credential_rewrite are mutually exclusive');
    }
    // Signing rewrites every request: an endpoint whose requests boundary never sees cannot be signed.
    if (on.tlsSkip) {
      report(ctx, node, childPath(path, 'credential_signing'), 'POLICY_SIGNING_INVALID', 'credential_signing cannot be combined with tls: skip');
    }
    // An exact host is known now: a region it does not name would refuse every request, so fail the load instead.
    if (signingRegion === undefined && on.hostKind === 'exact' && on.host !== undefined && regionFromHost(on.host) === undefined) {
      report(ctx, node, childPath(path, 'signing_region'), 'POLICY_SIGNING_INVALID',
        `cannot derive an AWS region from ${on.host}; set signing_region`);
    }
  }
  return { credentialSigning, signingService, signingRegion };
}
