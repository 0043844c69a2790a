import type { Insertable, Updateable } from 'kysely';
import type {
  DocmergeDocumentRow,
  DocmergeDocumentsTable,
  DocmergeIntegrationRow,
  DocmergeIntegrationsTable,
  DocmergeRunRow,
  DocmergeRunsTable,
} from '../../db/schema.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';

/** Everything but the template's bytes, which only generation and previews read. */
export type IntegrationInfo = Omit<DocmergeIntegrationRow, 'template'>;

const INFO_COLUMNS = [
  'id',
  'account_id',
  'form_id',
  'name',
  'template_kind',
  'template_name',
  'template_size',
  'tags',
  'mapping',
  'file_name',
  'logic',
  'email_to',
  'email_subject',
  'active',
  'flatten',
  'created_at',
  'updated_at',
] as const;

export async function insertIntegration(
  db: Executor,
  row: Insertable<DocmergeIntegrationsTable>,
): Promise<IntegrationInfo> {
  return db.insertInto('docmerge_integrations').values(row).returning(INFO_COLUMNS).executeTakeFirstOrThrow();
}

/** An integration of the account's form (the caller checks the form). */
export async function findIntegration(
  db: Executor,
  accountId: number,
  formId: number,
  id: number,
): Promise<IntegrationInfo | undefined> {
  return db
    .selectFrom('docmerge_integrations')
    .select(INFO_COLUMNS)
    .where('id', '=', id)
    .where('form_id', '=', formId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

/** With the template: for the worker (which acts for no account) and previews. */
export async function findIntegrationWithTemplate(
  db: Executor,
  id: number,
): Promise<DocmergeIntegrationRow | undefined> {
  return db.selectFrom('docmerge_integrations').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listIntegrations(db: Executor, accountId: number, formId: number): Promise<IntegrationInfo[]> {
  return db
    .selectFrom('docmerge_integrations')
    .select(INFO_COLUMNS)
    .where('form_id', '=', formId)
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
}

export async function countIntegrations(db: Executor, formId: number): Promise<number> {
  const row = await db
    .selectFrom('docmerge_integrations')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('form_id', '=', formId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** What every submission create reads, in its transaction: the active integrations of its form. */
export async function activeIntegrationsOf(db: Executor, formId: number): Promise<{ id: number }[]> {
  return db
    .selectFrom('docmerge_integrations')
    .select('id')
    .where('form_id', '=', formId)
    .where('active', '=', 1)
    .orderBy('id')
    .execute();
}

export async function updateIntegration(
  db: Executor,
  id: number,
  update: Updateable<DocmergeIntegrationsTable>,
): Promise<IntegrationInfo> {
  return db
    .updateTable('docmerge_integrations')
    .set(update)
    .where('id', '=', id)
    .returning(INFO_COLUMNS)
    .executeTakeFirstOrThrow(deletedMeanwhile('integration_not_found'));
}

/** Its run log goes with it (ON DELETE CASCADE); the documents it made stay with their submissions. */
export async function deleteIntegration(db: Executor, id: number): Promise<void> {
  await db.deleteFrom('docmerge_integrations').where('id', '=', id).execute();
}

export async function findDocumentOf(
  db: Executor,
  submissionId: number,
  integrationId: number,
): Promise<DocmergeDocumentRow | undefined> {
  return db
    .selectFrom('docmerge_documents')
    .selectAll()
    .where('submission_id', '=', submissionId)
    .where('integration_id', '=', integrationId)
    .executeTakeFirst();
}

/**
 * Records a made document, once: a second run of the same job (the first one's worker died
 * after the insert but before the job was marked done) inserts nothing and gets undefined.
 */
export async function insertDocument(
  db: Executor,
  row: Insertable<DocmergeDocumentsTable>,
): Promise<DocmergeDocumentRow | undefined> {
  return db
    .insertInto('docmerge_documents')
    .values(row)
    .onConflict((oc) => oc.columns(['submission_id', 'integration_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function documentsOfSubmission(db: Executor, submissionId: number): Promise<DocmergeDocumentRow[]> {
  return db
    .selectFrom('docmerge_documents')
    .selectAll()
    .where('submission_id', '=', submissionId)
    .orderBy('id')
    .execute();
}

export async function findDocument(
  db: Executor,
  accountId: number,
  submissionId: number,
  documentId: number,
): Promise<DocmergeDocumentRow | undefined> {
  return db
    .selectFrom('docmerge_documents')
    .selectAll()
    .where('id', '=', documentId)
    .where('submission_id', '=', submissionId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

/** The storage keys of a submission's documents, for removal once its delete commits. */
export async function documentKeysOf(db: Executor, submissionId: number): Promise<string[]> {
  const rows = await db
    .selectFrom('docmerge_documents')
    .select('storage_key')
    .where('submission_id', '=', submissionId)
    .execute();
  return rows.map((r) => r.storage_key);
}

export async function insertRun(db: Executor, row: Insertable<DocmergeRunsTable>): Promise<void> {
  await db.insertInto('docmerge_runs').values(row).execute();
}

export async function listRuns(
  db: Executor,
  integrationId: number,
  limit: number,
  offset: number,
): Promise<{ rows: DocmergeRunRow[]; total: number }> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('docmerge_runs')
      .selectAll()
      .where('integration_id', '=', integrationId)
      .orderBy('id', 'desc')
      .limit(limit)
      .offset(offset)
      .execute(),
    db
      .selectFrom('docmerge_runs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('integration_id', '=', integrationId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}
