import type { UserRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export async function listUsers(db: Executor, accountId: number): Promise<UserRow[]> {
  return db.selectFrom('users').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
}

export async function findUser(db: Executor, accountId: number, userId: number): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', userId).where('account_id', '=', accountId).executeTakeFirst();
}

export async function findUserByEmail(db: Executor, email: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
}

export async function updateUser(
  db: Executor,
  accountId: number,
  userId: number,
  set: Partial<Pick<UserRow, 'name' | 'role' | 'password_hash'>>,
): Promise<UserRow> {
  return db.updateTable('users').set(set).where('id', '=', userId).where('account_id', '=', accountId).returningAll().executeTakeFirstOrThrow();
}

/** Removes the user; their tokens, grants and form permissions go with them (foreign keys cascade). */
export async function deleteUser(db: Executor, accountId: number, userId: number): Promise<void> {
  await db.deleteFrom('users').where('id', '=', userId).where('account_id', '=', accountId).execute();
}

/** Drops a user's form permissions: owners and admins hold every level, so theirs would only mislead. */
export async function clearPermissions(db: Executor, userId: number): Promise<void> {
  await db.deleteFrom('form_permissions').where('user_id', '=', userId).execute();
}
