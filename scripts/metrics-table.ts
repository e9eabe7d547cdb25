// Writes the metric table of docs/metrics.md from src/app/metric-catalogue.ts. Run: npm run docs:metrics
import { readFile, writeFile } from 'node:fs/promises';
import { catalogueEntries } from '../src/app/metric-catalogue.js';
import { renderMetricTable, withMetricTable } from '../src/telemetry/metric-table.js';

const METRICS_DOC = new URL('../docs/metrics.md', import.meta.url);
await writeFile(METRICS_DOC, withMetricTable(await readFile(METRICS_DOC, 'utf8'), renderMetricTable(catalogueEntries())));
