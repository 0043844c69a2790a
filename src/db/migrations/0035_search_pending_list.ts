import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * The full-text index's pending list (PostgreSQL's GIN "fast update") at 1 MB, not the
 * server's default of 4 MB. New entries go to the list, and the backend whose insert finds it
 * over the limit moves it into the index there and then, inside that create's statement, which
 * holds up every create sharing the statement. With 4 MB that was the POST's p99 (81–143 ms);
 * with 1 MB it moves a quarter as much at a time (p99 40–55 ms in five runs of six in turns),
 * with more creates a second in five of the six (docs/performance.md, "Twenty-fifth pass"). A
 * search reads the whole list too. Updating the index directly (fastupdate off) cost
 * PostgreSQL twice the CPU a create. SQLite's FTS5 has no such list.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`ALTER INDEX submissions_search SET (gin_pending_list_limit = 1024)`.execute(db);
}
