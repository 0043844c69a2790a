import type { FormRow } from '../../db/schema.js';
import { hotQuery } from '../../db/hot-query.js';
import { submissionsCountOf, submissionsVersionOf } from '../forms/counts.js';
import { engineOf } from '../../db/engine.js';
import type { Executor } from '../../db/transaction.js';
import { SEALED_PREFILL_PREFIX } from './prefill-sealing.js';

// Every page view reads it: compiled once.
const selectByViewKey = hotQuery(1, (db, viewKey: string) =>
  db.selectFrom('forms').selectAll().select([submissionsCountOf, submissionsVersionOf]).where('view_key', '=', viewKey),
);

/** The form behind a hosted URL, deleted or not (a deleted one shows its own page). */
export async function findFormByViewKey(db: Executor, viewKey: string): Promise<FormRow | undefined> {
  const [row] = await selectByViewKey(db, viewKey);
  return row;
}

/** Whether the form is encrypted, read under a share lock (PostgreSQL) that holds off a change until commit. */
export async function isEncryptedNow(db: Executor, formId: number): Promise<boolean> {
  const row = await engineOf(db)
    .shareRows(db.selectFrom('forms').select('is_encrypted').where('id', '=', formId))
    .executeTakeFirst();
  return row?.is_encrypted === 1;
}

export async function insertPrefill(
  db: Executor,
  row: { id: string; accountId: number; formId: number; data: string; now: number; expiresAt: number },
): Promise<void> {
  await db
    .insertInto('prefill_tokens')
    .values({
      id: row.id,
      account_id: row.accountId,
      form_id: row.formId,
      data: row.data,
      created_at: row.now,
      expires_at: row.expiresAt,
    })
    .execute();
}

export async function findPrefill(
  db: Executor,
  id: string,
  formId: number,
  now: number,
): Promise<{ data: string } | undefined> {
  return db
    .selectFrom('prefill_tokens')
    .select('data')
    .where('id', '=', id)
    .where('form_id', '=', formId)
    .where('expires_at', '>', now)
    .executeTakeFirst();
}

/** Removes a form's prefill values that were stored in the clear: its encryption was turned on. */
export async function deletePlainPrefills(db: Executor, formId: number): Promise<void> {
  await db
    .deleteFrom('prefill_tokens')
    .where('form_id', '=', formId)
    .where('data', 'not like', `${SEALED_PREFILL_PREFIX}%`)
    .execute();
}

export async function deleteExpiredPrefills(db: Executor, now: number): Promise<number> {
  const result = await db.deleteFrom('prefill_tokens').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}

export const COUNT_COLUMNS = [
  'views',
  'starts',
  'partial_saves',
  'completions',
  'refused_rate_limit',
  'refused_honeypot',
  'refused_too_fast',
  'refused_too_large',
] as const;
export type CountColumn = (typeof COUNT_COLUMNS)[number];

/** Adds counts to a form's row of the day, making it when it is the day's first. */
export async function addCounts(
  db: Executor,
  accountId: number,
  formId: number,
  day: string,
  counts: Record<CountColumn, number>,
): Promise<void> {
  await db
    .insertInto('form_daily_stats')
    .values({ form_id: formId, day, account_id: accountId, ...counts })
    .onConflict((oc) =>
      oc.columns(['form_id', 'day']).doUpdateSet((eb) => {
        const set: Record<string, unknown> = {};
        for (const c of COUNT_COLUMNS) set[c] = eb(`form_daily_stats.${c}`, '+', eb.ref(`excluded.${c}`));
        return set as never;
      }),
    )
    .execute();
}

export async function dailyCounts(db: Executor, accountId: number, formId: number, from: string, to: string) {
  return db
    .selectFrom('form_daily_stats')
    .select(['day', ...COUNT_COLUMNS])
    .where('account_id', '=', accountId)
    .where('form_id', '=', formId)
    .where('day', '>=', from)
    .where('day', '<=', to)
    .orderBy('day')
    .execute();
}
