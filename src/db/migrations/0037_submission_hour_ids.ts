import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * Each hour's smallest and largest submission id (first_id, last_id), kept with its count.
 * A time range's page is found by walking the form's ids in order from the range's edge
 * (submissions/repository.ts, idsInRange). That edge had been read as the range's smallest or
 * largest id from the time index, a read of every index entry of the range: linear in its rows,
 * 77–128 ms on PostgreSQL for "oldest first since a time" half a year back
 * (docs/performance.md, "Twenty-ninth pass"). The hours of the range bound every one of its ids,
 * read in O(hours). Every create path widens its hour's bounds; a delete leaves them, so they
 * stay bounds (perhaps loose ones), never wrong. A slot's bounds are null where it holds only
 * deletes. The hours already written get the bounds of the rows they hold now, on every slot;
 * an hour whose rows were all deleted is dropped where its slots add up to none (a create's
 * slot and a delete's may differ on PostgreSQL), as it counts nothing: left, its creates' slot
 * would count rows without bounds, which a range's read takes for bounds it cannot trust.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('submission_hours').addColumn('first_id', 'integer').execute();
  await db.schema.alterTable('submission_hours').addColumn('last_id', 'integer').execute();
  await sql`UPDATE submission_hours SET first_id = b.first_id, last_id = b.last_id
    FROM (SELECT form_id, created_at / 3600000 AS hour, min(id) AS first_id, max(id) AS last_id
          FROM submissions GROUP BY form_id, created_at / 3600000) AS b
    WHERE submission_hours.form_id = b.form_id AND submission_hours.hour = b.hour`.execute(db);
  await sql`DELETE FROM submission_hours WHERE (form_id, hour) IN (
      SELECT form_id, hour FROM submission_hours GROUP BY form_id, hour
      HAVING sum(n) = 0 AND max(first_id) IS NULL)`.execute(db);
}
