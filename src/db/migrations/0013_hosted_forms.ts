import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * What the hosted form pages keep (src/modules/hosted, src/modules/partials): unfinished
 * entries (partial submissions), prefilled values behind a short token, and counts per form
 * and day (views, starts, partial saves, completions, refused submissions): one row per form
 * and day, added to, never a row per view.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('partial_submissions')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull())
    .addColumn('form_id', 'integer', (c) => c.notNull())
    // The SHA-256 of the resume token that only the person filling in the form holds.
    .addColumn('resume_hash', 'text', (c) => c.notNull().unique())
    // JSON of field id → stored value, or on an encrypted form sealed like a submission's.
    .addColumn('data', 'text', (c) => c.notNull())
    // Encrypted forms only: the same values sealed under a key that the resume token gives,
    // so that the person can resume without the form's password.
    .addColumn('resume_data', 'text')
    .addColumn('pretty_name', 'text')
    .addColumn('user_agent', 'text', (c) => c.notNull())
    .addColumn('remote_addr', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('partial_submissions_form')
    .on('partial_submissions')
    .columns(['form_id', 'created_at'])
    .execute();
  await db.schema.createIndex('partial_submissions_expiry').on('partial_submissions').column('expires_at').execute();

  await db.schema
    .createTable('prefill_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'integer', (c) => c.notNull())
    .addColumn('form_id', 'integer', (c) => c.notNull())
    // JSON: the checked fields of the request ([{ id, value }]).
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('prefill_tokens_expiry').on('prefill_tokens').column('expires_at').execute();

  await db.schema
    .createTable('form_daily_stats')
    .addColumn('form_id', 'integer', (c) => c.notNull())
    // The UTC day, YYYY-MM-DD.
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('account_id', 'integer', (c) => c.notNull())
    .addColumn('views', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('starts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('partial_saves', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('completions', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('refused_rate_limit', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('refused_honeypot', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('refused_too_fast', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('refused_too_large', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('form_daily_stats_pk', ['form_id', 'day'])
    .execute();
}
