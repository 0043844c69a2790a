import type { Kysely } from 'kysely';
import { idColumn, type Dialect } from '../dialect.js';

/**
 * Document merge (src/modules/docmerge): integrations of a form that turn each submission into
 * a DOCX or PDF made from a template, the documents they made, and their run log (one row per
 * attempt of a generation job, as webhooks keep their deliveries).
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('docmerge_integrations')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    // docx or pdf
    .addColumn('template_kind', 'text', (c) => c.notNull())
    .addColumn('template_name', 'text', (c) => c.notNull())
    // The template's bytes in base64: a few hundred KB at most, read by each generation.
    .addColumn('template', 'text', (c) => c.notNull())
    .addColumn('template_size', 'integer', (c) => c.notNull())
    // JSON list of the merge tags (DOCX) or form fields (PDF) the template holds.
    .addColumn('tags', 'text', (c) => c.notNull())
    // JSON object: tag or PDF field name → form field id, as given (defaults are worked out on use).
    .addColumn('mapping', 'text', (c) => c.notNull())
    .addColumn('file_name', 'text', (c) => c.notNull())
    // JSON rule of the shape of field logic, or null: every submission.
    .addColumn('logic', 'text')
    // JSON list of addresses the document is emailed to; [] sends none.
    .addColumn('email_to', 'text', (c) => c.notNull())
    .addColumn('email_subject', 'text')
    .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
    // PDF: 1 draws the filled fields into the page (the form is gone), 0 keeps them fillable.
    .addColumn('flatten', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // Every submission write reads the integrations of its form.
  await db.schema
    .createIndex('docmerge_integrations_form')
    .on('docmerge_integrations')
    .columns(['form_id', 'id'])
    .execute();

  await db.schema
    .createTable('docmerge_documents')
    .$call((t) => idColumn(t, dialect))
    .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('form_id', 'integer', (c) => c.notNull().references('forms.id').onDelete('cascade'))
    .addColumn('submission_id', 'integer', (c) => c.notNull().references('submissions.id').onDelete('cascade'))
    // No foreign key: a document stays with its submission when its integration is deleted.
    .addColumn('integration_id', 'integer', (c) => c.notNull())
    .addColumn('file_name', 'text', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    // The plaintext's size; a sealed object is a little longer.
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('storage_key', 'text', (c) => c.notNull().unique())
    .addColumn('sealed', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  // One document per integration and submission: a job run twice makes it once.
  await db.schema
    .createIndex('docmerge_documents_once')
    .on('docmerge_documents')
    .columns(['submission_id', 'integration_id'])
    .unique()
    .execute();

  await db.schema
    .createTable('docmerge_runs')
    .$call((t) => idColumn(t, dialect))
    .addColumn('integration_id', 'integer', (c) =>
      c.notNull().references('docmerge_integrations.id').onDelete('cascade'),
    )
    .addColumn('job_id', 'integer', (c) => c.notNull().references('jobs.id').onDelete('cascade'))
    .addColumn('submission_id', 'integer', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('attempted_at', 'bigint', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    // made, exists (an earlier run made it), skipped (conditions did not hold, or nothing to do), failed
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('document_id', 'integer')
    .addColumn('next_attempt_at', 'bigint')
    .execute();
  await db.schema
    .createIndex('docmerge_runs_integration')
    .on('docmerge_runs')
    .columns(['integration_id', 'id'])
    .execute();
  await db.schema.createIndex('docmerge_runs_job').on('docmerge_runs').column('job_id').execute();
}
