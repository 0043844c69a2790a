import type { UserRow } from '../../db/schema.js';
import { engineOf } from '../../db/engine.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';

export async function listUsers(db: Executor, accountId: number): Promise<UserRow[]> {
  return db.selectFrom('users').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
}

export async function findUser(db: Executor, accountId: number, userId: number): Promise<UserRow | undefined> {
  return selectUser(db, accountId, userId).executeTakeFirst();
}

/**
 * The same, its row held until the transaction ends (FOR SHARE on PostgreSQL): a delete of the
 * user that has begun is waited for and then finds none, so that a row written for the user
 * next is never refused by its foreign key (a 400) for a user that the caller just saw.
 */
export async function findUserHeld(db: Executor, accountId: number, userId: number): Promise<UserRow | undefined> {
  return selectUser(db, accountId, userId).$call(engineOf(db).shareRows).executeTakeFirst();
}

const selectUser = (db: Executor, accountId: number, userId: number) =>
  db.selectFrom('users').selectAll().where('id', '=', userId).where('account_id', '=', accountId);

/** The account's user with this email; emails are unique per account, not across accounts. */
export async function findUserByEmail(db: Executor, accountId: number, email: string): Promise<UserRow | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('email', '=', email)
    .executeTakeFirst();
}

/** Users in any account who may sign in with this email, with their account's name, oldest first. */
export async function findSignInCandidates(
  db: Executor,
  email: string,
): Promise<(UserRow & { account_name: string })[]> {
  return db
    .selectFrom('users as u')
    .innerJoin('accounts as a', 'a.id', 'u.account_id')
    .selectAll('u')
    .select('a.name as account_name')
    .where('u.email', '=', email)
    .where('u.password_hash', 'is not', null)
    .orderBy('u.id')
    .execute();
}

/** The password hash of another user with this email, in any account, whose salt a new hash shares. */
export async function passwordHashOfEmail(
  db: Executor,
  email: string,
  exceptUserId?: number,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('users')
    .select('password_hash')
    .where('email', '=', email)
    .where('password_hash', 'is not', null)
    .$if(exceptUserId !== undefined, (q) => q.where('id', '!=', exceptUserId!))
    .orderBy('id')
    .executeTakeFirst();
  return row?.password_hash ?? undefined;
}

export async function updateUser(
  db: Executor,
  accountId: number,
  userId: number,
  set: Partial<Pick<UserRow, 'name' | 'role' | 'password_hash'>>,
): Promise<UserRow> {
  return db
    .updateTable('users')
    .set(set)
    .where('id', '=', userId)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('user_not_found'));
}

/** Removes the user; their tokens, grants and form permissions go with them (foreign keys cascade). */
export async function deleteUser(db: Executor, accountId: number, userId: number): Promise<void> {
  await db.deleteFrom('users').where('id', '=', userId).where('account_id', '=', accountId).execute();
}

/** Drops a user's form permissions: owners and admins hold every level, so theirs would only mislead. */
export async function clearPermissions(db: Executor, userId: number): Promise<void> {
  await db.deleteFrom('form_permissions').where('user_id', '=', userId).execute();
}
