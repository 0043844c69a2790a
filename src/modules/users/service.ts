import type { Kysely } from 'kysely';
import type { AppContext } from '../../context.js';
import type { Kdf } from '../../crypto/hasher.js';
import { hashPassword } from '../../crypto/secrets.js';
import type { Database, UserRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, ConflictError, ForbiddenError, invalid, NotFoundError } from '../../errors.js';
import { isoTime } from '../../http/schemas.js';
import { insertUser } from '../accounts/repository.js';
import { findForm } from '../forms/repository.js';
import type { Level } from '../permissions/levels.js';
import * as permissions from '../permissions/repository.js';
import { revokeUserCredentials } from '../tokens/repository.js';
import * as repo from './repository.js';
import type { FormPermission, User, UserCreate, UserUpdate } from './schemas.js';
import type { AccountScope, Caller, FormRef, UserRef } from '../permissions/caller.js';

export function toUser(row: UserRow): User {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    role: row.role,
    canSignIn: row.password_hash !== null,
    created: isoTime(row.created_at),
  };
}

async function requireUser(db: Kysely<Database>, accountId: number, userId: number): Promise<UserRow> {
  const user = await repo.findUser(db, accountId, userId);
  if (!user) throw new NotFoundError('user_not_found');
  return user;
}

export async function listUsers(db: Kysely<Database>, { accountId }: AccountScope): Promise<{ users: User[] }> {
  return { users: (await repo.listUsers(db, accountId)).map(toUser) };
}

export async function getUser(db: Kysely<Database>, { accountId }: AccountScope, { userId }: UserRef): Promise<User> {
  return toUser(await requireUser(db, accountId, userId));
}

/**
 * The hash to store for a user's password. Every hash of one email shares the salt of the
 * first, whatever the account: sign-in, which looks for the email in every account, then
 * derives one key for all of them, and its time does not tell how many accounts have the
 * email. (Two first hashes made at the same moment may still differ; that costs sign-in a
 * second derivation, nothing else.) kdf is the process's bounded hasher, counted against the
 * account when the API asks.
 */
export async function hashPasswordFor(
  db: Executor,
  email: string,
  password: string,
  kdf: Kdf,
  userId?: number,
): Promise<string> {
  return hashPassword(password, kdf, await repo.passwordHashOfEmail(db, email, userId));
}

/** A user's name as stored: trimmed, and something is left. */
function nameOf(name: string): string {
  const trimmed = name.trim();
  if (trimmed === '') throw invalid('invalid_request', 'body.name', 'must not be blank');
  return trimmed;
}

/** kdf hashes the password: the process's bounded hasher, counted against the account from the API. */
export async function createUser(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  { accountId }: AccountScope,
  input: UserCreate,
  kdf: Kdf,
): Promise<User> {
  const name = nameOf(input.name);
  const email = input.email.trim().toLowerCase();
  // Hashing takes a while and much memory; done before the transaction so it holds no connection.
  const passwordHash = input.password === undefined ? null : await hashPasswordFor(ctx.db, email, input.password, kdf);
  return transact(ctx.db, async (trx) => {
    // Only this account's users: whether other accounts have the email is not the caller's to learn.
    if (await repo.findUserByEmail(trx, accountId, email))
      throw new ConflictError('email_taken', 'A user of this account already has this email');
    const id = await insertUser(trx, { accountId, email, name, passwordHash, role: input.role }, ctx.clock.now());
    return toUser((await repo.findUser(trx, accountId, id))!);
  });
}

/**
 * Changing a password that was set ends the user's other credentials: every personal access
 * token and OAuth grant, but the token making the request when it is the user's own (a
 * password change is what someone does who fears their account is in other hands; the
 * session they do it from stays). Setting a first password ends nothing.
 */
export async function updateUser(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  caller: Caller,
  { userId }: UserRef,
  input: UserUpdate,
  kdf: Kdf,
): Promise<User> {
  const { accountId, userId: callerId } = caller;
  const name = input.name === undefined ? undefined : nameOf(input.name);
  let passwordHash: string | undefined;
  if (input.password !== undefined) {
    const target = await repo.findUser(ctx.db, accountId, userId);
    if (!target) throw new NotFoundError('user_not_found');
    passwordHash = await hashPasswordFor(ctx.db, target.email, input.password, kdf, userId);
  }
  return transact(ctx.db, async (trx) => {
    const user = await repo.findUser(trx, accountId, userId);
    if (!user) throw new NotFoundError('user_not_found');
    if (input.role !== undefined && input.role !== user.role) {
      if (user.role === 'owner') throw new ForbiddenError('owner_protected', "The owner's role cannot change");
      if (userId === callerId) throw new ForbiddenError('own_role');
      if (input.role !== 'member') await repo.clearPermissions(trx, userId);
    }
    if (user.role === 'owner' && callerId !== userId && passwordHash !== undefined) {
      throw new ForbiddenError('owner_protected', "Only the owner can set the owner's password");
    }
    // The name is who the owner is to everyone in the account: an admin renaming them could pass for them.
    if (user.role === 'owner' && callerId !== userId && name !== undefined && name !== user.name) {
      throw new ForbiddenError('owner_protected', "Only the owner can change the owner's name");
    }
    if (passwordHash !== undefined && user.password_hash !== null) {
      await revokeUserCredentials(trx, userId, callerId === userId ? caller.tokenId : undefined, ctx.clock.now());
    }
    const updated = await repo.updateUser(trx, accountId, userId, {
      ...(name !== undefined ? { name } : {}),
      ...(input.role !== undefined ? { role: input.role } : {}),
      ...(passwordHash !== undefined ? { password_hash: passwordHash } : {}),
    });
    return toUser(updated);
  });
}

export async function deleteUser(
  db: Kysely<Database>,
  caller: Caller,
  { userId }: UserRef,
): Promise<{ id: number; deleted: true }> {
  const { accountId, userId: callerId } = caller;
  return transact(db, async (trx) => {
    const user = await repo.findUser(trx, accountId, userId);
    if (!user) throw new NotFoundError('user_not_found');
    if (user.role === 'owner') throw new ForbiddenError('owner_protected', 'The account owner cannot be removed');
    if (userId === callerId) throw new ForbiddenError('own_user');
    await repo.deleteUser(trx, accountId, userId);
    return { id: userId, deleted: true as const };
  });
}

const toPermission = (p: { formId: number; level: Level; updatedAt: number }): FormPermission => ({
  formId: p.formId,
  level: p.level,
  updated: isoTime(p.updatedAt),
});

export async function listPermissions(
  db: Kysely<Database>,
  { accountId }: AccountScope,
  { userId }: UserRef,
): Promise<{ userId: number; permissions: FormPermission[] }> {
  await requireUser(db, accountId, userId);
  return { userId, permissions: (await permissions.listPermissions(db, accountId, userId)).map(toPermission) };
}

/** Gives a member a level on a form of the account (replacing the one they held). */
export async function setPermission(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  { accountId }: AccountScope,
  { userId, formId }: UserRef & FormRef,
  level: Level,
): Promise<FormPermission> {
  return transact(ctx.db, async (trx) => {
    const user = await repo.findUserHeld(trx, accountId, userId);
    if (!user) throw new NotFoundError('user_not_found');
    if (user.role !== 'member')
      throw new BadRequestError(
        'not_a_member',
        'Owners and admins hold every level on every form; form permissions are for members',
      );
    if (!(await findForm(trx, accountId, formId)) && !(await findForm(trx, accountId, formId, true)))
      throw new NotFoundError('form_not_found');
    const now = ctx.clock.now();
    await permissions.setPermission(trx, { accountId, userId, formId, level }, now);
    return toPermission({ formId, level, updatedAt: now });
  });
}

export async function deletePermission(
  db: Kysely<Database>,
  { accountId }: AccountScope,
  { userId, formId }: UserRef & FormRef,
): Promise<{ userId: number; formId: number; deleted: true }> {
  return transact(db, async (trx) => {
    if (!(await repo.findUser(trx, accountId, userId))) throw new NotFoundError('user_not_found');
    if (!(await permissions.deletePermission(trx, accountId, userId, formId)))
      throw new NotFoundError('form_permission_not_found');
    return { userId, formId, deleted: true as const };
  });
}
