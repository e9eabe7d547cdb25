// Writes the README's metric table from src/metric-catalogue.ts. Run: npm run docs:metrics
import { readFile, writeFile } from 'node:fs/promises';
import { catalogueEntries } from '../src/app/metric-catalogue.js';
import { renderMetricTable, withMetricTable } from '../src/telemetry/metric-table.js';

const README = new URL('../README.md', import.meta.url);
await writeFile(README, withMetricTable(await readFile(README, 'utf8'), renderMetricTable(catalogueEntries())));
