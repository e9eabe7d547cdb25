import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { format, inspect } from 'node:util';
import { pino } from 'pino';
import { REDACTED, Secret } from '../../src/credentials/secret.js';

const CANARY = 'canary-7f3a9c-secret-value';

describe('Secret', () => {
  it('reveals its value only through reveal()', () => {
    const secret = new Secret(CANARY);
    assert.equal(secret.reveal(), CANARY);
    assert.equal(secret.length, CANARY.length);
    assert.ok(secret.equals(new Secret(CANARY)));
    assert.ok(!secret.equals(new Secret('other')));
  });

  it('renders as [redacted] through String, JSON, inspect, template literals, concatenation and format', () => {
    const secret = new Secret(CANARY);
    const renderings = [
      String(secret),
      `${secret}`,
      '' + secret,
      JSON.stringify(secret),
      JSON.stringify({ nested: { token: secret }, list: [secret] }),
      inspect(secret),
      inspect({ deep: { deeper: { secret } } }, { depth: 10, showHidden: true }),
      format('%s %o %O %j %d', secret, secret, secret, secret, secret),
      secret.toString(),
      Object.keys(secret).join(','),
      JSON.stringify(structuredClone({ secret })),
      inspect(new Map([['k', secret]])),
    ];
    for (const text of renderings) assert.ok(!text.includes(CANARY), text);
    assert.equal(String(secret), REDACTED);
    assert.equal(JSON.stringify(secret), `"${REDACTED}"`);
    assert.equal(inspect(secret), REDACTED);
  });

  it('never reaches a pino log line, whatever way it is logged', () => {
    const lines: string[] = [];
    const logger = pino({ level: 'trace' }, { write: (line: string) => lines.push(line) });
    const secret = new Secret(CANARY);
    logger.info({ secret, headers: { authorization: secret }, list: [secret] }, 'request %s', secret);
    logger.warn(`template ${secret}`);
    logger.error({ err: new Error(`failed with ${secret}`) });
    logger.child({ bound: secret }).debug({ again: secret }, 'child');
    logger.info(secret as unknown as object);
    assert.equal(lines.length, 5);
    for (const line of lines) assert.ok(!line.includes(CANARY), line);
    assert.ok(lines[0]?.includes(REDACTED));
  });
});
