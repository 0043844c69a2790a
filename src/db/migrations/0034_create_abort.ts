import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * formwork_abort(reason) raises an error (SQLSTATE FW001) from inside a statement. A plain
 * create on PostgreSQL is one statement run outside any transaction: when it finds the form
 * at another revision or one of its unique values taken, it ends itself with this, and what
 * it wrote goes with it (submissions/repository.ts). SQLite has no use for it.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`
    CREATE FUNCTION formwork_abort(reason text) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION USING ERRCODE = 'FW001', MESSAGE = reason;
    END $$`.execute(db);
}
