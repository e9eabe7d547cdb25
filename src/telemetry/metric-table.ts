// Renders the metric table of docs/metrics.md from catalogue entries (src/app/metric-catalogue.ts). Pure; the
// script scripts/metrics-table.ts writes it into that page and a unit test checks the page still matches.

import type { MetricSpec } from './metrics.js';

/** Label values listed in full up to this many; a longer closed set shows its first ones and its size. */
export const MAX_LISTED_LABEL_VALUES = 12;

export const METRIC_TABLE_START = '<!-- metrics:start -->';
export const METRIC_TABLE_END = '<!-- metrics:end -->';

function labelCell(spec: MetricSpec): string {
  const closed = Object.entries(spec.labels).map(([name, values]) => {
    const shown = values.slice(0, MAX_LISTED_LABEL_VALUES).map((v) => `\`${v}\``).join(', ');
    const more = values.length > MAX_LISTED_LABEL_VALUES ? `, … (${values.length} values)` : '';
    return `\`${name}\`: ${shown}${more}`;
  });
  const runtime = Object.entries(spec.runtimeLabels ?? {}).map(([name, from]) => `\`${name}\`: ${from}`);
  const all = [...closed, ...runtime];
  return all.length === 0 ? '–' : all.join('; ').replaceAll('|', '\\|');
}

export function renderMetricTable(specs: readonly MetricSpec[]): string {
  const rows = specs.map((spec) => `| \`${spec.name}\` | ${spec.type} | ${spec.unit === '' ? '–' : spec.unit} | ${spec.scope} | ${labelCell(spec)} | ${spec.help.replaceAll('|', '\\|')} |`);
  return ['| metric | type | unit | process | labels (closed sets) | meaning |', '|---|---|---|---|---|---|', ...rows].join('\n');
}

/** `readme` with the text between the markers replaced by `table`; throws when a marker is missing. */
export function withMetricTable(readme: string, table: string): string {
  const [head, rest] = readme.split(METRIC_TABLE_START);
  const tail = rest?.split(METRIC_TABLE_END)[1];
  if (head === undefined || tail === undefined) throw new Error(`the page lacks ${METRIC_TABLE_START} ... ${METRIC_TABLE_END}`);
  return `${head}${METRIC_TABLE_START}\n${table}\n${METRIC_TABLE_END}${tail}`;
}
