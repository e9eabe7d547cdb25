// What the kubelet substitutes into a container before it starts: the downward API's `fieldRef` values from the
// pod's metadata, and `$(VAR)` references in env values and args, expanded from the container's own env. A
// field path the pod tests cannot know (a node name, a pod IP) throws rather than guessing.

export interface PodMeta {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly serviceAccountName: string;
}

const MAP_FIELD = /^metadata\.(labels|annotations)\['([^']+)'\]$/;

/** The value a `fieldRef: { fieldPath }` env entry gets in a pod with this metadata. */
export function podField(meta: PodMeta, fieldPath: string, where: string): string {
  switch (fieldPath) {
    case 'metadata.name':
      return meta.name;
    case 'metadata.namespace':
      return meta.namespace;
    case 'metadata.uid':
      return meta.uid;
    case 'spec.serviceAccountName':
      return meta.serviceAccountName;
  }
  const map = MAP_FIELD.exec(fieldPath);
  if (map !== null) return (map[1] === 'labels' ? meta.labels : meta.annotations)[map[2] ?? ''] ?? '';
  throw new Error(`${where}: fieldRef ${fieldPath} (the pod tests cannot emulate this; extend test/harness/k8s-expand.ts)`);
}

/**
 * Kubernetes' `$(VAR)` expansion: a defined VAR is replaced, an undefined one is left as written, `$$` is one `$`,
 * and any other `$` stays. The kubelet applies it to env values (earlier entries only) and to command and args.
 */
export function expandVars(text: string, vars: ReadonlyMap<string, string>): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const next = text[i + 1];
    if (c !== '$' || next === undefined) {
      out += c;
    } else if (next === '$') {
      out += '$';
      i++;
    } else if (next === '(') {
      const close = text.indexOf(')', i + 2);
      if (close < 0) return out + text.slice(i);
      const name = text.slice(i + 2, close);
      out += vars.get(name) ?? `$(${name})`;
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}
