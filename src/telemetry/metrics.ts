// Small prom-client helpers on an injected Registry. Rule for every metric in boundary: each label value
// comes from a closed `as const` set (a reason, a class, a verdict), never a hostname, path or address.
import { Counter, collectDefaultMetrics, Gauge, type Registry } from 'prom-client';

const METRIC_PREFIX = 'boundary_';
/** What a label value outside its closed set is recorded as, so a bug cannot explode cardinality. */
const OTHER_LABEL_VALUE = 'other';
/** Label combinations are pre-created at zero (so rate() works from the first scrape) up to this many. */
const MAX_PRESET_SERIES = 256;

/** process_* and nodejs_* metrics (prefixed boundary_) on the given registry only. */
export function collectDefaultProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
}

type ClosedLabels<L extends string> = Readonly<Record<L, readonly string[]>>;

/** One value per label, each typed by its closed set (given `as const`, a free string does not compile). */
type ClosedLabelValues<S extends ClosedLabels<string>> = { readonly [K in keyof S]: S[K][number] };

export interface ClosedCounter<S extends ClosedLabels<string>> {
  inc(labels: ClosedLabelValues<S>, value?: number): void;
}

function combinations<L extends string>(labels: ClosedLabels<L>): Record<L, string>[] {
  let out: Record<string, string>[] = [{}];
  for (const [name, values] of Object.entries(labels) as [L, readonly string[]][]) {
    out = out.flatMap((partial) => values.map((value) => ({ ...partial, [name]: value })));
    if (out.length > MAX_PRESET_SERIES) return [];
  }
  return out as Record<L, string>[];
}

function closedValues<L extends string>(labels: ClosedLabels<L>, given: Readonly<Record<L, string>>): Record<L, string> {
  const out = {} as Record<L, string>;
  for (const name of Object.keys(labels) as L[]) {
    const value = given[name];
    out[name] = labels[name].includes(value) ? value : OTHER_LABEL_VALUE;
  }
  return out;
}

/**
 * A counter whose label values are checked against closed sets: a value outside its set is counted as
 * `other`. `name` is given without the boundary_ prefix.
 */
export function createClosedCounter<S extends ClosedLabels<string>>(
  registry: Registry,
  spec: {
    name: string;
    help: string;
    labels: S;
    /** Runs before each collection (a scrape): the place to add counts tallied off the hot path. */
    collect?: () => void;
  },
): ClosedCounter<S> {
  type L = keyof S & string;
  const sets = spec.labels as ClosedLabels<L>;
  const names = Object.keys(sets) as L[];
  const counter = new Counter<L>({
    name: METRIC_PREFIX + spec.name,
    help: spec.help,
    labelNames: names,
    registers: [registry],
    ...(spec.collect === undefined ? {} : { collect: spec.collect }),
  });
  for (const preset of combinations(sets)) counter.inc(preset, 0);
  return {
    inc(labels, value = 1) {
      if (names.length === 0) counter.inc(value);
      else counter.inc(closedValues(sets, labels as Readonly<Record<L, string>>), value);
    },
  };
}

/** A gauge without labels (in-flight tunnels, cache entries, ...). */
export function createPlainGauge(registry: Registry, spec: { name: string; help: string }): Gauge {
  return new Gauge({ name: METRIC_PREFIX + spec.name, help: spec.help, registers: [registry] });
}
