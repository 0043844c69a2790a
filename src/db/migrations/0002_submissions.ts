import { sql, type Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const float = dialect === 'postgres' ? 'double precision' : 'real';
  // Goes up with every submission created, edited or deleted: what cached counts of a form check.
  await db.schema
    .alterTable('forms')
    .addColumn('submissions_version', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createTable('submissions')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('user_agent', 'text', (c) => c.notNull())
    .addColumn('remote_addr', 'text', (c) => c.notNull())
    .addColumn('latitude', float)
    .addColumn('longitude', float)
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('pretty_name', 'text')
    .execute();
  await db.schema.createIndex('submissions_form_id').on('submissions').columns(['form_id', 'id']).execute();
  await db.schema
    .createIndex('submissions_form_created')
    .on('submissions')
    .columns(['form_id', 'created_at', 'id'])
    .execute();
  await db.schema.createIndex('submissions_account_id').on('submissions').columns(['account_id', 'id']).execute();

  // Values of fields marked unique; the unique index is what finally guards them.
  await db.schema
    .createTable('submission_unique_values')
    .addColumn('submission_id', 'integer', (c) => c.notNull().references('submissions.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull())
    .addColumn('field_id', 'integer', (c) => c.notNull())
    .addColumn('value_norm', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('submission_unique_values_key')
    .on('submission_unique_values')
    .columns(['form_id', 'field_id', 'value_norm'])
    .unique()
    .execute();
  await db.schema
    .createIndex('submission_unique_values_submission')
    .on('submission_unique_values')
    .column('submission_id')
    .execute();

  // Keyword and field search: one full-text index per submission over the words of every
  // value and one token per field value (see modules/submissions/keywords.ts). A full-text
  // index takes a submission's 30-odd tokens far more cheaply than as many B-tree rows.
  if (dialect === 'postgres') {
    await sql`ALTER TABLE submissions ADD COLUMN search_vector tsvector NOT NULL DEFAULT ''::tsvector`.execute(db);
    await sql`CREATE INDEX submissions_search ON submissions USING gin (search_vector)`.execute(db);
  } else {
    // '_' is part of a token, so the tokens that words never make (_form…, _f…) stay whole.
    await sql`CREATE VIRTUAL TABLE submissions_fts USING fts5(content, content='', contentless_delete=1, tokenize="unicode61 remove_diacritics 2 tokenchars '_'")`.execute(
      db,
    );
  }

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('idem_key', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['account_id', 'idem_key'])
    .execute();
  await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').column('created_at').execute();
}
