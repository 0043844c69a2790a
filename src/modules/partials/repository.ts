import { engineOf } from '../../db/engine.js';
import type { FormRow, PartialSubmissionRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export interface PartialWrite {
  data: string;
  prettyName: string | null;
  userAgent: string;
  remoteAddr: string;
  now: number;
  expiresAt: number;
}

export async function insertPartial(
  db: Executor,
  row: PartialWrite & { accountId: number; formId: number; resumeHash: string },
): Promise<PartialSubmissionRow> {
  return db
    .insertInto('partial_submissions')
    .values({
      account_id: row.accountId,
      form_id: row.formId,
      resume_hash: row.resumeHash,
      data: row.data,
      resume_data: null,
      pretty_name: row.prettyName,
      user_agent: row.userAgent,
      remote_addr: row.remoteAddr,
      created_at: row.now,
      updated_at: row.now,
      expires_at: row.expiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function updatePartial(
  db: Executor,
  id: number,
  row: Partial<PartialWrite> & { resumeData?: string | null },
): Promise<void> {
  await db
    .updateTable('partial_submissions')
    .set({
      ...(row.data !== undefined && { data: row.data }),
      ...(row.resumeData !== undefined && { resume_data: row.resumeData }),
      ...(row.prettyName !== undefined && { pretty_name: row.prettyName }),
      ...(row.userAgent !== undefined && { user_agent: row.userAgent }),
      ...(row.remoteAddr !== undefined && { remote_addr: row.remoteAddr }),
      ...(row.now !== undefined && { updated_at: row.now }),
      ...(row.expiresAt !== undefined && { expires_at: row.expiresAt }),
    })
    .where('id', '=', id)
    .execute();
}

export async function findByResumeHash(
  db: Executor,
  formId: number,
  hash: string,
  now: number,
): Promise<PartialSubmissionRow | undefined> {
  return db
    .selectFrom('partial_submissions')
    .selectAll()
    .where('resume_hash', '=', hash)
    .where('form_id', '=', formId)
    .where('expires_at', '>', now)
    .executeTakeFirst();
}

/** A live partial of a live form of the account. */
export async function findPartial(
  db: Executor,
  accountId: number,
  id: number,
  now: number,
): Promise<PartialSubmissionRow | undefined> {
  return db
    .selectFrom('partial_submissions')
    .innerJoin('forms', 'forms.id', 'partial_submissions.form_id')
    .selectAll('partial_submissions')
    .where('partial_submissions.id', '=', id)
    .where('partial_submissions.account_id', '=', accountId)
    .where('partial_submissions.expires_at', '>', now)
    .where('forms.deleted_at', 'is', null)
    .executeTakeFirst();
}

/** A form's live partials in a creation-time range, in order (filters that need the values run on these). */
export async function listPartials(
  db: Executor,
  accountId: number,
  formId: number,
  range: { from?: number; to?: number; order: 'asc' | 'desc'; now: number },
): Promise<PartialSubmissionRow[]> {
  return db
    .selectFrom('partial_submissions')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('form_id', '=', formId)
    .where('expires_at', '>', range.now)
    .$if(range.from !== undefined, (q) => q.where('created_at', '>=', range.from!))
    .$if(range.to !== undefined, (q) => q.where('created_at', '<=', range.to!))
    .orderBy('created_at', range.order)
    .orderBy('id', range.order)
    .execute();
}

/**
 * How the form's new data is stored now (encryption/keys.ts, sealingKeyOf), read under a share
 * lock (PostgreSQL) that holds off a change of it until this save commits: a save is then
 * stored as the form is when it commits, never the old way behind a conversion's back.
 */
export async function encryptionNow(
  db: Executor,
  formId: number,
): Promise<Pick<FormRow, 'encryption_key' | 'encryption_state'> | undefined> {
  return engineOf(db)
    .shareRows(db.selectFrom('forms').select(['encryption_key', 'encryption_state']).where('id', '=', formId))
    .executeTakeFirst();
}

/** A conversion's batch: the form's partials after `after` in id order, expired ones too. */
export async function nextPartials(
  db: Executor,
  formId: number,
  after: number | undefined,
  size: number,
): Promise<PartialSubmissionRow[]> {
  return db
    .selectFrom('partial_submissions')
    .selectAll()
    .where('form_id', '=', formId)
    .$if(after !== undefined, (q) => q.where('id', '>', after!))
    .orderBy('id')
    .limit(size)
    .execute();
}

/**
 * Stores a partial the way a conversion made it, unless it was saved since it was read (that
 * save stored it as the form is now): whether it did.
 */
export async function rewritePartial(
  db: Executor,
  row: Pick<PartialSubmissionRow, 'id' | 'data' | 'updated_at'>,
  write: { data: string; prettyName: string | null; resumeData: string | null },
): Promise<boolean> {
  const result = await db
    .updateTable('partial_submissions')
    .set({ data: write.data, pretty_name: write.prettyName, resume_data: write.resumeData })
    .where('id', '=', row.id)
    .where('data', '=', row.data)
    .where('updated_at', '=', row.updated_at)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function deletePartial(db: Executor, id: number): Promise<void> {
  await db.deleteFrom('partial_submissions').where('id', '=', id).execute();
}

export async function deleteExpiredPartials(db: Executor, now: number, limit: number): Promise<number> {
  const ids = await db
    .selectFrom('partial_submissions')
    .select('id')
    .where('expires_at', '<=', now)
    .limit(limit)
    .execute();
  if (ids.length === 0) return 0;
  await db
    .deleteFrom('partial_submissions')
    .where(
      'id',
      'in',
      ids.map((r) => r.id),
    )
    .execute();
  return ids.length;
}
