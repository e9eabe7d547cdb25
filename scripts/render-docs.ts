// Renders docs/errors.md's generated section from the closed sets in code, so docs cannot drift:
// the error table from ERROR_CODES. Run: node --import tsx scripts/render-docs.ts
import { readFile, writeFile } from 'node:fs/promises';
import { ERROR_CODES } from '../src/shared/errors.js';

const ERRORS_DOC = new URL('../docs/errors.md', import.meta.url);

function errorTable(): string {
  const rows = Object.entries(ERROR_CODES).map(([code, meaning]) => `| \`${code}\` | ${meaning.replaceAll('|', '\\|')} |`);
  return ['| code | meaning |', '|---|---|', ...rows].join('\n');
}

const text = await readFile(ERRORS_DOC, 'utf8');
const start = '<!-- errors:start -->';
const end = '<!-- errors:end -->';
const [head, rest] = text.split(start);
const tail = rest?.split(end)[1];
if (head === undefined || tail === undefined) throw new Error(`docs/errors.md lacks ${start} ... ${end}`);
await writeFile(ERRORS_DOC, `${head}${start}\n${errorTable()}\n${end}${tail}`);
