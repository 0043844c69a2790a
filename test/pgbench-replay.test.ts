import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { literal, pgbenchScript, REPLAYED_JOBS_RUN_AT } from '../bench/pgbench.js';
import type { Database } from '../src/db/schema.js';
import { jobsAsArgs, jobsInsertedFrom } from '../src/jobs/repository.js';
import { TEST_PG_URL } from './support/helpers.js';

/**
 * The benchmark's replay of the service's statements (bench/pgbench.ts, pgbench (b) and (b')):
 * a captured statement becomes one line of a pgbench script with its values inlined. The
 * payloads of a create's outbox rows are lines (jobsAsArgs): when the script's whitespace was
 * collapsed after the values went in, a replayed create with events wrote one outbox row
 * holding both payloads, which the service's worker beside pgbench then failed to read.
 */
describe('the pgbench replay of captured statements', () => {
  const values = ['{"a":"x:y"}\n{"b":"it\'s \\"q\\""}', 'a\ttab, a\r\nline break, a back\\slash', "quote'd", 'plain'];
  const select = {
    text: `SELECT ${values.map((_, i) => `$${i + 1}::text AS v${i}`).join(',\n       ')}`,
    values,
  };

  it('writes each statement on one line, whatever its values hold', () => {
    const script = pgbenchScript([select]);
    assert.equal(script.split('\n').length, 1);
    for (const v of values) assert.doesNotMatch(literal(v), /[\n\r\t]/);
  });

  it('makes the outbox rows it writes never due, so no worker delivers them', () => {
    // The service's own statement text, compiled as it sends it (no connection is made).
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool() }) });
    const [jobs, payloads] = jobsAsArgs([
      { kind: 'webhooks.deliver', payload: '{"n":1}', runAt: 1_796_022_775_274, maxAttempts: 8 },
      { kind: 'emails.send', payload: '{"n":2}', runAt: 1_796_022_775_274, maxAttempts: 8, requestId: 'r' },
    ]);
    const compiled = sql`WITH j AS (${jobsInsertedFrom(jobs, payloads)}) SELECT 1`.compile(db);
    const script = pgbenchScript([{ text: compiled.sql, values: compiled.parameters as string[] }]);
    assert.doesNotMatch(script, /1796022775274/);
    assert.equal(script.split(`"r"\\x3a${REPLAYED_JOBS_RUN_AT}`).length, 3);
  });

  it('gives PostgreSQL the values as they were captured', { skip: TEST_PG_URL === undefined }, async () => {
    const client = new pg.Client({ connectionString: TEST_PG_URL });
    await client.connect();
    try {
      const { rows } = await client.query<Record<string, string>>(pgbenchScript([select]));
      assert.deepEqual(
        values.map((_, i) => rows[0]![`v${i}`]),
        values,
      );
    } finally {
      await client.end();
    }
  });
});
