import type { Executor } from '../../db/transaction.js';

export interface SubaccountRow {
  id: number;
  name: string;
  created_at: number;
  owner_id: number;
  owner_email: string;
  owner_name: string;
}

function selectSubaccounts(db: Executor, parentId: number) {
  return db
    .selectFrom('accounts')
    .innerJoin('users', (join) => join.onRef('users.account_id', '=', 'accounts.id').on('users.role', '=', 'owner'))
    .select([
      'accounts.id',
      'accounts.name',
      'accounts.created_at',
      'users.id as owner_id',
      'users.email as owner_email',
      'users.name as owner_name',
    ])
    .where('accounts.parent_account_id', '=', parentId);
}

/** A subaccount of the parent account, or undefined (another account's answers the same as none). */
export async function findSubaccount(
  db: Executor,
  parentId: number,
  subaccountId: number,
): Promise<SubaccountRow | undefined> {
  return selectSubaccounts(db, parentId).where('accounts.id', '=', subaccountId).executeTakeFirst();
}

export async function listSubaccounts(
  db: Executor,
  parentId: number,
  page: { limit: number; offset: number },
): Promise<{ rows: SubaccountRow[]; total: number }> {
  const [rows, count] = await Promise.all([
    selectSubaccounts(db, parentId).orderBy('accounts.id').limit(page.limit).offset(page.offset).execute(),
    db
      .selectFrom('accounts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('parent_account_id', '=', parentId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export async function countLiveForms(db: Executor, accountIds: number[]): Promise<Map<number, number>> {
  if (accountIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('forms')
    .select(['account_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('account_id', 'in', accountIds)
    .where('deleted_at', 'is', null)
    .groupBy('account_id')
    .execute();
  return new Map(rows.map((r) => [r.account_id, Number(r.n)]));
}
