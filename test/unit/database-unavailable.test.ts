/**
 * What the driver says when PostgreSQL cannot be reached is recognised as the database out of
 * reach (a 503 database_unavailable), whichever way it reaches the error handlers; a server
 * that answers with an error of the statement's own is not. The errors are node-postgres's
 * own, from a real connection attempt to a port where nothing listens.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.js';
import { databaseUnavailable, translateDbError } from '../../src/db/transaction.js';
import { ServiceUnavailableError } from '../../src/errors.js';

/** A port that was free a moment ago: nothing listens on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('a database out of reach', () => {
  it('a refused connection is a 503 database_unavailable with Retry-After, from the error handler and the data layer', async () => {
    const db = openDatabase({ databaseUrl: `postgres://nobody@127.0.0.1:${await closedPort()}/none`, dataDir: '/tmp' });
    try {
      const error = await sql`SELECT 1`.execute(db.kysely).then(
        () => assert.fail('connected to a closed port'),
        (e: unknown) => e,
      );
      for (const mapped of [databaseUnavailable(error), translateDbError(error)]) {
        assert.ok(mapped instanceof ServiceUnavailableError, String(error));
        assert.equal(mapped.code, 'database_unavailable');
        assert.equal(mapped.retryAfterSeconds, 2);
        assert.equal(mapped.cause, error);
      }
    } finally {
      await db.close();
    }
  });

  it("a statement's own failure is not, nor another service's socket", () => {
    for (const code of ['23505', '40P01', '42P01', '57014', 'SQLITE_BUSY']) {
      assert.equal(databaseUnavailable({ code, message: 'x' }), undefined, code);
    }
    for (const code of ['57P01', '57P02', '57P03', '08006', '08001']) {
      assert.ok(databaseUnavailable({ code, message: 'x' }) instanceof ServiceUnavailableError, code);
    }
    assert.equal(databaseUnavailable(new Error('Connection terminated unexpectedly'))?.code, 'database_unavailable');
    // A socket's own failure says nothing of whose socket it was (storage's, a webhook
    // receiver's): only the pool's are the database's.
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9000'), { code: 'ECONNREFUSED' });
    assert.equal(databaseUnavailable(refused), undefined);
    assert.equal(databaseUnavailable(undefined), undefined);
  });
});
