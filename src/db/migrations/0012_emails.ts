import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * Confirmation and notification emails of forms (one table, told apart by kind), and the mail
 * log that keeps every message when no SMTP server is set (see docs/emails.md).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('form_emails')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    // 'confirmation' (to the respondent) or 'notification' (to set recipients).
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('sender_name', 'text', (c) => c.notNull())
    .addColumn('reply_to', 'text')
    // No foreign keys on field ids: a deleted field leaves the email in place, sending nothing to it.
    .addColumn('reply_to_field_id', 'integer')
    .addColumn('recipient_field_id', 'integer')
    // JSON list of addresses; empty for confirmations.
    .addColumn('recipients', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .addColumn('format', 'text', (c) => c.notNull())
    // JSON, the shape of a field's logic; null sends on every submission.
    .addColumn('logic', 'text')
    .addColumn('attach_files', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // The one query every new submission makes: the emails of its form.
  await db.schema.createIndex('form_emails_form').on('form_emails').columns(['form_id', 'kind']).execute();

  await db.schema
    .createTable('mail_log')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    // No foreign keys but the account's: a message stays in the log after its email, form or submission goes.
    .addColumn('form_id', 'integer', (c) => c.notNull())
    .addColumn('email_id', 'integer', (c) => c.notNull())
    .addColumn('submission_id', 'integer', (c) => c.notNull())
    // The job that wrote it: a job that runs twice writes one message.
    .addColumn('job_id', 'integer', (c) => c.notNull().unique())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('recipients', 'text', (c) => c.notNull())
    .addColumn('reply_to', 'text')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('text_body', 'text', (c) => c.notNull())
    .addColumn('html_body', 'text')
    // JSON list of {name, size, contentType}: the files themselves stay with the submission.
    .addColumn('attachments', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('mail_log_account').on('mail_log').columns(['account_id', 'id']).execute();
}
