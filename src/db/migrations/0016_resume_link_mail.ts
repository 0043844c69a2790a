import { sql, type Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * The mail log keeps resume-link emails too (a respondent's link to an unfinished entry,
 * docs/hosted.md): they come from no form email and no submission, so email_id and
 * submission_id may be null, and partial_submission_id names the partial instead.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') {
    await sql`ALTER TABLE mail_log ALTER COLUMN email_id DROP NOT NULL`.execute(db);
    await sql`ALTER TABLE mail_log ALTER COLUMN submission_id DROP NOT NULL`.execute(db);
    await db.schema.alterTable('mail_log').addColumn('partial_submission_id', 'integer').execute();
    return;
  }
  // SQLite cannot drop a NOT NULL in place: the table is made again and the rows copied.
  await db.schema
    .createTable('mail_log_next')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull())
    .addColumn('email_id', 'integer')
    .addColumn('submission_id', 'integer')
    .addColumn('job_id', 'integer', (c) => c.notNull().unique())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('recipients', 'text', (c) => c.notNull())
    .addColumn('reply_to', 'text')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('text_body', 'text', (c) => c.notNull())
    .addColumn('html_body', 'text')
    .addColumn('attachments', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('partial_submission_id', 'integer')
    .execute();
  await sql`INSERT INTO mail_log_next (id, account_id, form_id, email_id, submission_id, job_id, kind, sender,
      recipients, reply_to, subject, text_body, html_body, attachments, created_at)
    SELECT id, account_id, form_id, email_id, submission_id, job_id, kind, sender, recipients, reply_to, subject,
      text_body, html_body, attachments, created_at FROM mail_log`.execute(db);
  await db.schema.dropTable('mail_log').execute();
  await db.schema.alterTable('mail_log_next').renameTo('mail_log').execute();
  await db.schema.createIndex('mail_log_account').on('mail_log').columns(['account_id', 'id']).execute();
}
