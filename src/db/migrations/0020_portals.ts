import { sql, type Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * Portals (src/modules/portals, docs/portals.md): a portal groups forms of an account for a
 * set of people (portal users), who sign in to its page through a single-use link sent by
 * email. Sign-in links and sessions keep only hashes of their tokens. A submission made on the
 * hosted page by a signed-in portal user is tied to that user in portal_submissions. The mail
 * log keeps sign-in emails too: they come from no form, so its form_id may be null, and
 * portal_id names the portal.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('portals')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    // The public part of the portal page's address (/p/{portal_key}).
    .addColumn('portal_key', 'text', (c) => c.notNull().unique())
    .addColumn('avatar_key', 'text')
    .addColumn('avatar_type', 'text')
    .addColumn('avatar_size', 'integer')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('portals_account').on('portals').columns(['account_id', 'id']).execute();

  await db.schema
    .createTable('portal_forms')
    .addColumn('portal_id', 'integer', (c) => c.notNull().references('portals.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    // Epoch ms, or null for none.
    .addColumn('due_at', 'bigint')
    .addColumn('required', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('portal_forms_pk', ['portal_id', 'form_id'])
    .execute();
  await db.schema.createIndex('portal_forms_form').on('portal_forms').column('form_id').execute();

  await db.schema
    .createTable('portal_users')
    .$call((t) => idColumn(t, dialect))
    .addColumn('portal_id', 'integer', (c) => c.notNull().references('portals.id').onDelete('cascade'))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('email', 'text', (c) => c.notNull())
    // The address in lower case: one person per address in a portal.
    .addColumn('email_key', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('last_sign_in_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('portal_users_email')
    .on('portal_users')
    .columns(['portal_id', 'email_key'])
    .unique()
    .execute();

  // Sign-in links: the SHA-256 of the token, single use (used_at), until expires_at.
  await db.schema
    .createTable('portal_signin_tokens')
    .$call((t) => idColumn(t, dialect))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('portal_user_id', 'integer', (c) => c.notNull().references('portal_users.id').onDelete('cascade'))
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('portal_signin_tokens_user')
    .on('portal_signin_tokens')
    .column('portal_user_id')
    .execute();

  // Sessions of the portal page: the SHA-256 of the cookie's value.
  await db.schema
    .createTable('portal_sessions')
    .$call((t) => idColumn(t, dialect))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('portal_user_id', 'integer', (c) => c.notNull().references('portal_users.id').onDelete('cascade'))
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('portal_sessions_user').on('portal_sessions').column('portal_user_id').execute();

  // A submission made by a signed-in portal user; it goes with the submission or the user.
  await db.schema
    .createTable('portal_submissions')
    .addColumn('submission_id', 'integer', (c) =>
      c.primaryKey().notNull().references('submissions.id').onDelete('cascade'),
    )
    .addColumn('portal_user_id', 'integer', (c) => c.notNull().references('portal_users.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('portal_submissions_user_form')
    .on('portal_submissions')
    .columns(['portal_user_id', 'form_id'])
    .execute();

  if (dialect === 'postgres') {
    await sql`ALTER TABLE mail_log ALTER COLUMN form_id DROP NOT NULL`.execute(db);
    await db.schema.alterTable('mail_log').addColumn('portal_id', 'integer').execute();
    return;
  }
  // SQLite cannot drop a NOT NULL in place: the table is made again and the rows copied (as 0016 did).
  await db.schema
    .createTable('mail_log_next')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer')
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
    .addColumn('portal_id', 'integer')
    .execute();
  await sql`INSERT INTO mail_log_next (id, account_id, form_id, email_id, submission_id, job_id, kind, sender,
      recipients, reply_to, subject, text_body, html_body, attachments, created_at, partial_submission_id)
    SELECT id, account_id, form_id, email_id, submission_id, job_id, kind, sender, recipients, reply_to, subject,
      text_body, html_body, attachments, created_at, partial_submission_id FROM mail_log`.execute(db);
  await db.schema.dropTable('mail_log').execute();
  await db.schema.alterTable('mail_log_next').renameTo('mail_log').execute();
  await db.schema.createIndex('mail_log_account').on('mail_log').columns(['account_id', 'id']).execute();
}
