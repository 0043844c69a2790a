import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * Submission counts leave the form's row. Every create, edit and delete updated
 * forms.submissions_count and submissions_version, so on PostgreSQL concurrent writers to
 * one form queued on that row's lock until commit. Counts now live in rows of their own,
 * spread over a few slots per form (a writer adds to the slot of its connection) and summed
 * on read:
 *
 * - form_submission_counts: per form and slot, the submissions added (n) and the writes
 *   made (version, which cached totals check: it goes up with every create, edit and delete);
 * - submission_hours: per form, UTC hour of created_at and slot, the submissions added, so
 *   that a time range's total is read from whole hours plus the rows of its two edge hours.
 *
 * The existing counts are carried over into slot 0.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('form_submission_counts')
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('slot', 'integer', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('form_submission_counts_pk', ['form_id', 'slot'])
    .execute();
  await db.schema
    .createTable('submission_hours')
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    // Hours since the epoch (created_at / 3,600,000, rounded down).
    .addColumn('hour', 'integer', (c) => c.notNull())
    .addColumn('slot', 'integer', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('submission_hours_pk', ['form_id', 'hour', 'slot'])
    .execute();

  await sql`INSERT INTO form_submission_counts (form_id, slot, n, version)
    SELECT id, 0, submissions_count, submissions_version FROM forms
    WHERE submissions_count <> 0 OR submissions_version <> 0`.execute(db);
  await sql`INSERT INTO submission_hours (form_id, hour, slot, n)
    SELECT form_id, created_at / 3600000, 0, count(*) FROM submissions GROUP BY form_id, created_at / 3600000`.execute(
    db,
  );

  await db.schema.alterTable('forms').dropColumn('submissions_count').execute();
  await db.schema.alterTable('forms').dropColumn('submissions_version').execute();
}
