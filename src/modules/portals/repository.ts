import type { Insertable } from 'kysely';
import type { PortalFormRow, PortalRow, PortalsTable, PortalUserRow } from '../../db/schema.js';
import { engineOf } from '../../db/engine.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';

/** A portal form with what the records and the page show of its form. */
export type PortalFormWithForm = PortalFormRow & { name: string; view_key: string };

export async function findPortal(db: Executor, accountId: number, portalId: number): Promise<PortalRow | undefined> {
  return db
    .selectFrom('portals')
    .selectAll()
    .where('id', '=', portalId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

export async function findPortalByKey(db: Executor, portalKey: string): Promise<PortalRow | undefined> {
  return db.selectFrom('portals').selectAll().where('portal_key', '=', portalKey).executeTakeFirst();
}

export async function listPortals(
  db: Executor,
  accountId: number,
  limit: number,
  offset: number,
): Promise<{ rows: PortalRow[]; total: number }> {
  const query = db.selectFrom('portals').where('account_id', '=', accountId);
  const [rows, count] = await Promise.all([
    query.selectAll().orderBy('id').limit(limit).offset(offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/** Live forms and users of each portal. */
export async function countsOf(
  db: Executor,
  portalIds: number[],
): Promise<Map<number, { forms: number; users: number }>> {
  const out = new Map(portalIds.map((id) => [id, { forms: 0, users: 0 }]));
  if (portalIds.length === 0) return out;
  const [forms, users] = await Promise.all([
    db
      .selectFrom('portal_forms')
      .innerJoin('forms', 'forms.id', 'portal_forms.form_id')
      .select(['portal_forms.portal_id', (eb) => eb.fn.countAll<number>().as('n')])
      .where('portal_forms.portal_id', 'in', portalIds)
      .where('forms.deleted_at', 'is', null)
      .groupBy('portal_forms.portal_id')
      .execute(),
    db
      .selectFrom('portal_users')
      .select(['portal_id', (eb) => eb.fn.countAll<number>().as('n')])
      .where('portal_id', 'in', portalIds)
      .groupBy('portal_id')
      .execute(),
  ]);
  for (const r of forms) out.get(r.portal_id)!.forms = Number(r.n);
  for (const r of users) out.get(r.portal_id)!.users = Number(r.n);
  return out;
}

export async function insertPortal(db: Executor, row: Insertable<PortalsTable>): Promise<PortalRow> {
  return db.insertInto('portals').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updatePortal(
  db: Executor,
  portalId: number,
  update: {
    name?: string;
    description?: string | null;
    avatar_key?: string | null;
    avatar_type?: string | null;
    avatar_size?: number | null;
  },
  now: number,
): Promise<PortalRow> {
  return db
    .updateTable('portals')
    .set({ ...update, updated_at: now })
    .where('id', '=', portalId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('portal_not_found'));
}

export async function deletePortal(db: Executor, portalId: number): Promise<void> {
  // Sign-in links, sessions and submission ties go with the users (ON DELETE CASCADE).
  await db.deleteFrom('portals').where('id', '=', portalId).execute();
}

/** The portal's forms, with their forms' names and view keys; deleted forms are left out. */
export async function portalForms(db: Executor, portalId: number, formId?: number): Promise<PortalFormWithForm[]> {
  return db
    .selectFrom('portal_forms')
    .innerJoin('forms', 'forms.id', 'portal_forms.form_id')
    .selectAll('portal_forms')
    .select(['forms.name', 'forms.view_key'])
    .where('portal_forms.portal_id', '=', portalId)
    .where('forms.deleted_at', 'is', null)
    .$if(formId !== undefined, (q) => q.where('portal_forms.form_id', '=', formId!))
    .orderBy('portal_forms.created_at')
    .orderBy('portal_forms.form_id')
    .execute();
}

/** Whether the form is in the portal at all (deleted forms too). */
export async function hasForm(db: Executor, portalId: number, formId: number): Promise<boolean> {
  const row = await db
    .selectFrom('portal_forms')
    .select('form_id')
    .where('portal_id', '=', portalId)
    .where('form_id', '=', formId)
    .executeTakeFirst();
  return row !== undefined;
}

export async function insertPortalForms(db: Executor, rows: PortalFormRow[]): Promise<void> {
  if (rows.length === 0) return;
  for (let i = 0; i < rows.length; i += 100)
    await db
      .insertInto('portal_forms')
      .values(rows.slice(i, i + 100))
      .execute();
}

export async function updatePortalForm(
  db: Executor,
  portalId: number,
  formId: number,
  update: { due_at?: number | null; required?: number },
  now: number,
): Promise<void> {
  await db
    .updateTable('portal_forms')
    .set({ ...update, updated_at: now })
    .where('portal_id', '=', portalId)
    .where('form_id', '=', formId)
    .execute();
}

export async function deletePortalForm(db: Executor, portalId: number, formId: number): Promise<void> {
  await db.deleteFrom('portal_forms').where('portal_id', '=', portalId).where('form_id', '=', formId).execute();
}

export async function portalUsers(db: Executor, portalId: number): Promise<PortalUserRow[]> {
  return db
    .selectFrom('portal_users')
    .selectAll()
    .where('portal_id', '=', portalId)
    .orderBy('email_key')
    .orderBy('id')
    .execute();
}

export async function findPortalUser(
  db: Executor,
  portalId: number,
  userId: number,
): Promise<PortalUserRow | undefined> {
  return db
    .selectFrom('portal_users')
    .selectAll()
    .where('portal_id', '=', portalId)
    .where('id', '=', userId)
    .executeTakeFirst();
}

export async function findPortalUserByEmail(
  db: Executor,
  portalId: number,
  emailKey: string,
): Promise<PortalUserRow | undefined> {
  return db
    .selectFrom('portal_users')
    .selectAll()
    .where('portal_id', '=', portalId)
    .where('email_key', '=', emailKey)
    .executeTakeFirst();
}

export async function insertPortalUser(
  db: Executor,
  row: { portal_id: number; account_id: number; email: string; email_key: string; name: string },
  now: number,
): Promise<PortalUserRow> {
  return db
    .insertInto('portal_users')
    .values({ ...row, last_sign_in_at: null, created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function updatePortalUser(
  db: Executor,
  userId: number,
  update: { email?: string; email_key?: string; name?: string; last_sign_in_at?: number },
  now: number,
): Promise<PortalUserRow> {
  return db
    .updateTable('portal_users')
    .set({ ...update, updated_at: now })
    .where('id', '=', userId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('portal_user_not_found'));
}

export async function deletePortalUser(db: Executor, userId: number): Promise<void> {
  await db.deleteFrom('portal_users').where('id', '=', userId).execute();
}

export async function deleteSessionsOf(db: Executor, userId: number): Promise<void> {
  await db.deleteFrom('portal_sessions').where('portal_user_id', '=', userId).execute();
  await db.deleteFrom('portal_signin_tokens').where('portal_user_id', '=', userId).execute();
}

// Sign-in links and sessions.

export async function insertSigninToken(
  db: Executor,
  row: { token_hash: string; portal_user_id: number; expires_at: number },
  now: number,
): Promise<void> {
  await db
    .insertInto('portal_signin_tokens')
    .values({ ...row, used_at: null, created_at: now })
    .execute();
}

/** The user a sign-in link would sign in, without using it: undefined for a link that is unknown, used, expired or of another portal. */
export async function findLiveSigninToken(
  db: Executor,
  portalId: number,
  tokenHash: string,
  now: number,
): Promise<PortalUserRow | undefined> {
  return db
    .selectFrom('portal_signin_tokens')
    .innerJoin('portal_users', 'portal_users.id', 'portal_signin_tokens.portal_user_id')
    .selectAll('portal_users')
    .where('portal_signin_tokens.token_hash', '=', tokenHash)
    .where('portal_users.portal_id', '=', portalId)
    .where('portal_signin_tokens.used_at', 'is', null)
    .where('portal_signin_tokens.expires_at', '>', now)
    .executeTakeFirst();
}

/**
 * Marks a sign-in link used, once: the user it signs in, or undefined for a link that is
 * unknown, used, expired, or of another portal. The conditional UPDATE is the single use:
 * of two requests with the same link, one changes the row.
 */
export async function useSigninToken(
  db: Executor,
  portalId: number,
  tokenHash: string,
  now: number,
): Promise<PortalUserRow | undefined> {
  const row = await db
    .selectFrom('portal_signin_tokens')
    .innerJoin('portal_users', 'portal_users.id', 'portal_signin_tokens.portal_user_id')
    .select(['portal_signin_tokens.id', 'portal_signin_tokens.portal_user_id'])
    .where('portal_signin_tokens.token_hash', '=', tokenHash)
    .where('portal_users.portal_id', '=', portalId)
    .executeTakeFirst();
  if (!row) return undefined;
  const used = await db
    .updateTable('portal_signin_tokens')
    .set({ used_at: now })
    .where('id', '=', row.id)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  if (Number(used.numUpdatedRows) !== 1) return undefined;
  return db.selectFrom('portal_users').selectAll().where('id', '=', row.portal_user_id).executeTakeFirst();
}

/** Links past their expiry, or used, are of no more use once they no longer count against the hourly limit. */
export async function deleteSpentSigninTokens(
  db: Executor,
  userId: number,
  now: number,
  before: number,
): Promise<void> {
  await db
    .deleteFrom('portal_signin_tokens')
    .where('portal_user_id', '=', userId)
    .where('created_at', '<', before)
    .where((eb) => eb.or([eb('used_at', 'is not', null), eb('expires_at', '<=', now)]))
    .execute();
}

export async function hasSigninToken(db: Executor, tokenHash: string): Promise<boolean> {
  return (
    (await db
      .selectFrom('portal_signin_tokens')
      .select('id')
      .where('token_hash', '=', tokenHash)
      .executeTakeFirst()) !== undefined
  );
}

/** Locks the user's row until the transaction ends (where rows can be locked): links are counted and made one at a time. */
export async function lockPortalUser(db: Executor, userId: number): Promise<void> {
  await engineOf(db)
    .lockRows(db.selectFrom('portal_users').select('id').where('id', '=', userId))
    .execute();
}

/** The links made for the user since the time (for the hourly limit). */
export async function countSigninTokensSince(db: Executor, userId: number, since: number): Promise<number> {
  const row = await db
    .selectFrom('portal_signin_tokens')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('portal_user_id', '=', userId)
    .where('created_at', '>=', since)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function insertSession(
  db: Executor,
  row: { token_hash: string; portal_user_id: number; expires_at: number },
  now: number,
): Promise<void> {
  await db
    .insertInto('portal_sessions')
    .values({ ...row, created_at: now })
    .execute();
}

/** The user of a live session, with the portal it belongs to. */
export async function sessionUser(
  db: Executor,
  tokenHash: string,
  now: number,
): Promise<(PortalUserRow & { session_id: number }) | undefined> {
  return db
    .selectFrom('portal_sessions')
    .innerJoin('portal_users', 'portal_users.id', 'portal_sessions.portal_user_id')
    .selectAll('portal_users')
    .select('portal_sessions.id as session_id')
    .where('portal_sessions.token_hash', '=', tokenHash)
    .where('portal_sessions.expires_at', '>', now)
    .executeTakeFirst();
}

export async function deleteSession(db: Executor, tokenHash: string): Promise<void> {
  await db.deleteFrom('portal_sessions').where('token_hash', '=', tokenHash).execute();
}

export async function deleteExpiredSessions(db: Executor, userId: number, now: number): Promise<void> {
  await db.deleteFrom('portal_sessions').where('portal_user_id', '=', userId).where('expires_at', '<=', now).execute();
}

/**
 * Deletes every portal's sign-in links and sessions that expired before `before` (epoch ms);
 * a used link went with its expiry too, since a link is used before it expires. Returns how
 * many of each.
 */
export async function deleteExpiredSignins(db: Executor, before: number): Promise<{ links: number; sessions: number }> {
  const links = await db.deleteFrom('portal_signin_tokens').where('expires_at', '<', before).executeTakeFirst();
  const sessions = await db.deleteFrom('portal_sessions').where('expires_at', '<', before).executeTakeFirst();
  return { links: Number(links.numDeletedRows), sessions: Number(sessions.numDeletedRows) };
}

// Submissions tied to portal users.

/** Ties a submission to the portal user who made it, in the submission's transaction. */
export async function tieSubmission(
  db: Executor,
  row: { submission_id: number; portal_user_id: number; form_id: number },
  now: number,
): Promise<void> {
  await db
    .insertInto('portal_submissions')
    .values({ ...row, created_at: now })
    .execute();
}

/** For each of the forms, when the user last submitted it (and how many times), among submissions that still exist. */
export async function submittedBy(
  db: Executor,
  userId: number,
  formIds: number[],
): Promise<Map<number, { count: number; last: number }>> {
  if (formIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('portal_submissions')
    .select(['form_id', (eb) => eb.fn.countAll<number>().as('n'), (eb) => eb.fn.max('created_at').as('last')])
    .where('portal_user_id', '=', userId)
    .where('form_id', 'in', formIds)
    .groupBy('form_id')
    .execute();
  return new Map(rows.map((r) => [r.form_id, { count: Number(r.n), last: Number(r.last) }]));
}

/** Whether the form is one of the portal's (and not deleted). */
export async function portalHasLiveForm(db: Executor, portalId: number, formId: number): Promise<boolean> {
  return (await portalForms(db, portalId, formId)).length > 0;
}
