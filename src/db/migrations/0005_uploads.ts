import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/**
 * Uploaded files, from the moment an upload URL is issued. state: issued (URL handed out)
 * → receiving (the service is taking the bytes) → stored (all bytes kept) → claimed (a
 * submission holds it). Uploads through a presigned S3 URL skip receiving and stored: the
 * bucket takes the bytes without telling us, so their object is checked when claimed.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('uploads')
    .addColumn('file_key', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    // No foreign key: a deleted field's files stay with the submissions that hold them.
    .addColumn('field_id', 'integer', (c) => c.notNull())
    .addColumn('filename', 'text', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('storage_key', 'text', (c) => c.notNull())
    // The field's maxFileSize when the URL was issued: what the service PUT enforces.
    .addColumn('max_size', 'bigint', (c) => c.notNull())
    .addColumn('size', 'bigint')
    .addColumn('state', 'text', (c) => c.notNull())
    // 'service' (PUT to this service) or 'presigned' (PUT straight to the bucket).
    .addColumn('via', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    // Set null rather than cascade: a row that loses its submission some other way still
    // names an object to remove.
    .addColumn('submission_id', 'integer', (c) => c.references('submissions.id').onDelete('set null'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('uploads_state_expires').on('uploads').columns(['state', 'expires_at']).execute();
  await db.schema.createIndex('uploads_submission').on('uploads').column('submission_id').execute();
}
