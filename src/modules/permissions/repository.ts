import type { Executor } from '../../db/transaction.js';
import type { Level } from './levels.js';

/**
 * What a user holds on a form: undefined when the form is not in the account (the route then
 * answers 404 as for any unknown form), null when it is but the user holds no level on it.
 */
export async function levelOnForm(
  db: Executor,
  accountId: number,
  userId: number,
  formId: number,
): Promise<Level | null | undefined> {
  const row = await db
    .selectFrom('forms as f')
    .leftJoin('form_permissions as p', (join) => join.onRef('p.form_id', '=', 'f.id').on('p.user_id', '=', userId))
    .select(['p.level as level'])
    .where('f.id', '=', formId)
    .where('f.account_id', '=', accountId)
    .executeTakeFirst();
  return row === undefined ? undefined : (row.level ?? null);
}

/** Ids of the forms a member holds any level on, as a subquery. */
export function permittedForms(db: Executor, userId: number) {
  return db.selectFrom('form_permissions').select('form_id').where('user_id', '=', userId);
}

/** The form a submission of the account belongs to. */
/** The form of a partial submission of the account (for access rules with formFrom: 'partialSubmissionId'). */
export async function formOfPartial(db: Executor, accountId: number, partialId: number): Promise<number | undefined> {
  const row = await db
    .selectFrom('partial_submissions')
    .select('form_id')
    .where('id', '=', partialId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.form_id;
}

export async function formOfSubmission(
  db: Executor,
  accountId: number,
  submissionId: number,
): Promise<number | undefined> {
  const row = await db
    .selectFrom('submissions')
    .select('form_id')
    .where('id', '=', submissionId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.form_id;
}

/** The form a webhook of the account belongs to. */
export async function formOfWebhook(db: Executor, accountId: number, webhookId: number): Promise<number | undefined> {
  const row = await db
    .selectFrom('webhooks')
    .select('form_id')
    .where('id', '=', webhookId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.form_id;
}

/** The form a confirmation or notification email of the account belongs to. */
export async function formOfEmail(
  db: Executor,
  accountId: number,
  kind: 'confirmation' | 'notification',
  emailId: number,
): Promise<number | undefined> {
  const row = await db
    .selectFrom('form_emails')
    .select('form_id')
    .where('id', '=', emailId)
    .where('kind', '=', kind)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.form_id;
}

export async function listPermissions(
  db: Executor,
  accountId: number,
  userId: number,
): Promise<{ formId: number; level: Level; updatedAt: number }[]> {
  const rows = await db
    .selectFrom('form_permissions')
    .select(['form_id', 'level', 'updated_at'])
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .orderBy('form_id')
    .execute();
  return rows.map((r) => ({ formId: r.form_id, level: r.level, updatedAt: Number(r.updated_at) }));
}

export async function setPermission(
  db: Executor,
  p: { accountId: number; userId: number; formId: number; level: Level },
  now: number,
): Promise<void> {
  await db
    .insertInto('form_permissions')
    .values({ account_id: p.accountId, user_id: p.userId, form_id: p.formId, level: p.level, updated_at: now })
    .onConflict((oc) => oc.columns(['user_id', 'form_id']).doUpdateSet({ level: p.level, updated_at: now }))
    .execute();
}

export async function deletePermission(
  db: Executor,
  accountId: number,
  userId: number,
  formId: number,
): Promise<boolean> {
  const result = await db
    .deleteFrom('form_permissions')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('form_id', '=', formId)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** The form a field of the account belongs to (the v2 paths /field/{id} name no form). */
export async function formOfField(db: Executor, accountId: number, fieldId: number): Promise<number | undefined> {
  const row = await db
    .selectFrom('fields')
    .select('form_id')
    .where('id', '=', fieldId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.form_id;
}
