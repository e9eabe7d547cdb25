// Renders the README's generated sections from the closed sets in code, so docs cannot drift:
// the error table from ERROR_CODES. Run: node --import tsx scripts/render-docs.ts
import { readFile, writeFile } from 'node:fs/promises';
import { ERROR_CODES } from '../src/shared/errors.js';

const README = new URL('../README.md', import.meta.url);

function errorTable(): string {
  const rows = Object.entries(ERROR_CODES).map(([code, meaning]) => `| \`${code}\` | ${meaning.replaceAll('|', '\\|')} |`);
  return ['| code | meaning |', '|---|---|', ...rows].join('\n');
}

const text = await readFile(README, 'utf8');
const start = '<!-- errors:start -->';
const end = '<!-- errors:end -->';
const [head, rest] = text.split(start);
const tail = rest?.split(end)[1];
if (head === undefined || tail === undefined) throw new Error(`README lacks ${start} ... ${end}`);
await writeFile(README, `${head}${start}\n${errorTable()}\n${end}${tail}`);
