// The one path from a metric's catalogue entry (src/metric-catalogue.ts) to a prom-client metric on an injected
// Registry: label values are checked against their closed sets (anything else is `other`) and every series that
// can be known up front is created at zero, so rate() works from the first scrape. Never declares a metric itself.
import { eventLoopLag } from './event-loop-lag.js';
import { Counter, collectDefaultMetrics, Gauge, Registry } from './prom.js';

/** What a label value outside its closed set is recorded as, so a bug cannot explode cardinality. */
export const OTHER_LABEL_VALUE = 'other';
/** Label combinations are pre-created at zero up to this many per metric; beyond, series appear on first use. */
export const MAX_PRESET_SERIES = 512;

export type MetricType = 'counter' | 'gauge' | 'histogram';

/** One catalogue entry. `labels` maps each label name to its closed value set. */
export interface MetricSpec {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  /** `seconds`, `bytes`, `info`, or '' for a plain count. */
  readonly unit: string;
  readonly labels: Readonly<Record<string, readonly string[]>>;
  /** Labels whose closed set is not known until run time, with where it comes from (their owner pre-creates). */
  readonly runtimeLabels?: Readonly<Record<string, string>>;
  readonly buckets?: readonly number[];
  /** Which process exposes it. */
  readonly scope: 'boundary' | 'supervisor';
}

/** One value per label, each typed by its closed set or `other` (given `as const`, a free string does not compile). */
export type LabelValues<S extends MetricSpec> = { readonly [K in keyof S['labels']]: S['labels'][K][number] | typeof OTHER_LABEL_VALUE } & {
  readonly [K in keyof NonNullable<S['runtimeLabels']>]: string;
};

export interface CounterRecorder<S extends MetricSpec> {
  inc(labels: LabelValues<S>, value?: number): void;
  /** One label combination, checked once: a hot path that counts the same series again and again keeps the result. */
  bind(labels: LabelValues<S>): BoundCounter;
}
export interface BoundCounter {
  inc(value?: number): void;
}
export interface GaugeRecorder<S extends MetricSpec> {
  set(labels: LabelValues<S>, value: number): void;
  inc(labels: LabelValues<S>, value?: number): void;
  dec(labels: LabelValues<S>, value?: number): void;
}
/** A series bound once at start: the hot path records with one call and builds no label object. */
export interface Observer {
  observe(value: number): void;
}
export interface HistogramRecorder<S extends MetricSpec> {
  /** Binds one label combination; call once at start and keep the result. */
  bind(labels: LabelValues<S>): Observer;
}

/**
 * A Registry whose metrics are never created: every helper below hands out no-op recorders. Only the benchmark's
 * metrics-off entry builds one (bench/proxy.sh), to measure what recording costs on the same build.
 */
export class MetricsOffRegistry extends Registry {}

/** True for a MetricsOffRegistry: recorders are no-ops, and callers may skip clock reads too. */
export function metricsOff(registry: Registry): boolean {
  return registry instanceof MetricsOffRegistry;
}

/**
 * prom-client defaults that are gauges named `_total`, which `promtool check metrics` rejects; the same counts stay
 * available per type as nodejs_active_handles, nodejs_active_requests and nodejs_active_resources.
 */
const LINT_FAILING_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'] as const;

/** process_* and nodejs_* (prom-client defaults, standard names) on the given registry only. */
export function collectDefaultProcessMetrics(registry: Registry): void {
  if (metricsOff(registry)) return;
  collectDefaultMetrics(registry);
  eventLoopLag(registry);
  for (const name of LINT_FAILING_DEFAULTS) registry.removeSingleMetric(name);
}

function combinations(labels: Readonly<Record<string, readonly string[]>>): Record<string, string>[] {
  let out: Record<string, string>[] = [{}];
  for (const [name, values] of Object.entries(labels)) {
    out = out.flatMap((partial) => values.map((value) => ({ ...partial, [name]: value })));
    if (out.length > MAX_PRESET_SERIES) return [];
  }
  return out;
}

/** The label object prom-client records, each value checked against its closed set. */
function closedValues(spec: MetricSpec, given: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, values] of Object.entries(spec.labels)) {
    const value = given[name] ?? OTHER_LABEL_VALUE;
    out[name] = values.includes(value) ? value : OTHER_LABEL_VALUE;
  }
  for (const name of Object.keys(spec.runtimeLabels ?? {})) out[name] = given[name] ?? OTHER_LABEL_VALUE;
  return out;
}

function labelNames(spec: MetricSpec): string[] {
  return [...Object.keys(spec.labels), ...Object.keys(spec.runtimeLabels ?? {})];
}

function hasLabels(spec: MetricSpec): boolean {
  return Object.keys(spec.labels).length > 0 || Object.keys(spec.runtimeLabels ?? {}).length > 0;
}

const NOOP_OBSERVER: Observer & BoundCounter = { observe: () => undefined, inc: () => undefined };
const NOOP = { inc: () => undefined, dec: () => undefined, set: () => undefined, bind: () => NOOP_OBSERVER };

export interface CollectHook<S extends MetricSpec> {
  /** Runs before each collection (a scrape): the place to add counts tallied off the hot path, or to read gauges. */
  readonly collect?: (recorder: S['type'] extends 'gauge' ? GaugeRecorder<S> : CounterRecorder<S>) => void;
}

/** One label combination of a counter: its checked label object, and what was counted since the last scrape. */
interface Tally {
  readonly labels: Record<string, string>;
  pending: number;
  /** Whether prom-client has the series yet: an increment by 0 creates it, as prom-client's own would. */
  known: boolean;
}

/**
 * Counts by label combination in plain numbers, added to prom-client only when it collects (a scrape): a hot path
 * pays a lookup per label and an addition, not prom-client's label checks and hashing on every increment.
 */
function createTallies(spec: MetricSpec): { tally(given: Readonly<Record<string, string>>): Tally; drain(add: (t: Tally) => void): void } {
  const names = labelNames(spec);
  // Closed sets as Sets; runtime labels (their owners bound them) have none.
  const closed = names.map((name) => (spec.labels[name] === undefined ? undefined : new Set(spec.labels[name])));
  const root = new Map<string, unknown>();
  const all: Tally[] = [];
  return {
    tally(given) {
      let node = root;
      for (let i = 0; i < names.length - 1; i++) {
        const value = checked(given, i);
        let next = node.get(value) as Map<string, unknown> | undefined;
        if (next === undefined) {
          next = new Map();
          node.set(value, next);
        }
        node = next;
      }
      const last = names.length === 0 ? '' : checked(given, names.length - 1);
      let found = node.get(last) as Tally | undefined;
      if (found === undefined) {
        found = { labels: closedValues(spec, given), pending: 0, known: false };
        node.set(last, found);
        all.push(found);
      }
      return found;
    },
    drain(add) {
      for (const t of all) {
        if (t.pending === 0 && t.known) continue;
        add(t);
        t.pending = 0;
        t.known = true;
      }
    },
  };
  function checked(given: Readonly<Record<string, string>>, i: number): string {
    const value = given[names[i] as string] ?? OTHER_LABEL_VALUE;
    const values = closed[i];
    return values === undefined || values.has(value) ? value : OTHER_LABEL_VALUE;
  }
}

export function createCounter<S extends MetricSpec & { type: 'counter' }>(registry: Registry, spec: S, hook: CollectHook<S> = {}): CounterRecorder<S> {
  if (metricsOff(registry)) return NOOP;
  const labelled = hasLabels(spec);
  const tallies = createTallies(spec);
  const unlabelled = labelled ? undefined : tallies.tally({});
  let recorder: CounterRecorder<S>;
  const counter = new Counter<string>({
    name: spec.name,
    help: spec.help,
    labelNames: labelNames(spec),
    registers: [registry],
    collect: () => {
      hook.collect?.(recorder as never);
      tallies.drain((t) => (labelled ? counter.inc(t.labels, t.pending) : counter.inc(t.pending)));
    },
  });
  recorder = {
    inc(labels, value = 1) {
      (unlabelled ?? tallies.tally(labels as Record<string, string>)).pending += value;
    },
    bind(labels) {
      const tally = unlabelled ?? tallies.tally(labels as Record<string, string>);
      return {
        inc(value = 1) {
          tally.pending += value;
        },
      };
    },
  };
  if (spec.runtimeLabels === undefined) {
    if (!labelled) counter.inc(0);
    else for (const preset of combinations(spec.labels)) counter.inc(preset, 0);
  }
  return recorder;
}

export function createGauge<S extends MetricSpec & { type: 'gauge' }>(registry: Registry, spec: S, hook: CollectHook<S> = {}): GaugeRecorder<S> {
  if (metricsOff(registry)) return NOOP;
  const labelled = hasLabels(spec);
  let recorder: GaugeRecorder<S>;
  const gauge = new Gauge<string>({
    name: spec.name,
    help: spec.help,
    labelNames: labelNames(spec),
    registers: [registry],
    ...(hook.collect === undefined ? {} : { collect: () => hook.collect?.(recorder as never) }),
  });
  const labelsOf = (labels: LabelValues<S>): Record<string, string> => closedValues(spec, labels as Record<string, string>);
  recorder = {
    set(labels, value) {
      if (labelled) gauge.set(labelsOf(labels), value);
      else gauge.set(value);
    },
    inc(labels, value = 1) {
      if (labelled) gauge.inc(labelsOf(labels), value);
      else gauge.inc(value);
    },
    dec(labels, value = 1) {
      if (labelled) gauge.dec(labelsOf(labels), value);
      else gauge.dec(value);
    },
  };
  if (spec.runtimeLabels === undefined) {
    if (!labelled) gauge.set(0);
    else for (const preset of combinations(spec.labels)) gauge.set(preset, 0);
  }
  return recorder;
}

/**
 * One histogram series: a count per bucket, summed into cumulative `le` buckets only at scrape time. observe() is a
 * bucket search and three additions; prom-client's Histogram builds a label object and a hash on every call, which
 * showed up at about 3 % of a forwarded request's CPU in profiles.
 */
class BucketSeries implements Observer {
  readonly labels: Readonly<Record<string, string>>;
  readonly bounds: readonly number[];
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(labels: Readonly<Record<string, string>>, bounds: readonly number[]) {
    this.labels = labels;
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length);
  }
  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    if (i < bounds.length) this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += value;
    this.count++;
  }
}

interface SampleValue {
  readonly labels: Record<string, string | number>;
  readonly value: number;
  readonly metricName: string;
}

export function createHistogram<S extends MetricSpec & { type: 'histogram' }>(registry: Registry, spec: S): HistogramRecorder<S> {
  if (metricsOff(registry)) return NOOP;
  const bounds = [...(spec.buckets ?? [])];
  const series = new Map<string, BucketSeries>();
  const names = labelNames(spec);
  function seriesFor(labels: Record<string, string>): BucketSeries {
    const key = names.map((name) => labels[name] ?? '').join('\u0000');
    let found = series.get(key);
    if (found === undefined) {
      found = new BucketSeries(labels, bounds);
      series.set(key, found);
    }
    return found;
  }
  // prom-client renders any registered object with this shape, in its text format.
  const metric = {
    name: spec.name,
    help: spec.help,
    type: 'histogram',
    aggregator: 'sum',
    get() {
      const values: SampleValue[] = [];
      for (const one of series.values()) {
        let cumulative = 0;
        for (let i = 0; i < bounds.length; i++) {
          cumulative += one.counts[i] as number;
          values.push({ labels: { ...one.labels, le: bounds[i] as number }, value: cumulative, metricName: `${spec.name}_bucket` });
        }
        values.push({ labels: { ...one.labels, le: '+Inf' }, value: one.count, metricName: `${spec.name}_bucket` });
        values.push({ labels: { ...one.labels }, value: one.sum, metricName: `${spec.name}_sum` });
        values.push({ labels: { ...one.labels }, value: one.count, metricName: `${spec.name}_count` });
      }
      return Promise.resolve({ name: spec.name, help: spec.help, type: 'histogram', aggregator: 'sum', values });
    },
    reset() {
      series.clear();
    },
  };
  registry.registerMetric(metric as never);
  if (!hasLabels(spec)) seriesFor({});
  else if (spec.runtimeLabels === undefined) for (const preset of combinations(spec.labels)) seriesFor(preset);
  return {
    bind(labels) {
      return seriesFor(closedValues(spec, labels as Record<string, string>));
    },
  };
}

/** A label-free gauge as a plain object (in-flight tunnels, open connections): inc/dec/set without label objects. */
export interface PlainGauge {
  inc(): void;
  dec(): void;
  set(value: number): void;
}

export function plainGauge<S extends MetricSpec & { type: 'gauge' }>(recorder: GaugeRecorder<S>): PlainGauge {
  const none = {} as LabelValues<S>;
  return { inc: () => recorder.inc(none), dec: () => recorder.dec(none), set: (value) => recorder.set(none, value) };
}
