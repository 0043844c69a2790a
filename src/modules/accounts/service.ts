import type { AppContext } from '../../context.js';
import type { Kdf } from '../../crypto/hasher.js';
import { hashToken, newToken } from '../../crypto/secrets.js';
import { transact, type Executor } from '../../db/transaction.js';
import { invalid, NotFoundError } from '../../errors.js';
import { hashPasswordFor } from '../users/service.js';
import { insertDefaultTheme } from '../themes/service.js';
import * as repo from './repository.js';

export const PAT_PREFIX = 'fw_pat_';
/** Characters of a personal access token kept in clear to tell tokens apart: the kind and 4 of its 43 random ones. */
export const tokenPrefix = (token: string): string => token.slice(0, PAT_PREFIX.length + 4);
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface CreatedAccount {
  accountId: number;
  userId: number;
  token: string;
}

interface NewOwner {
  name: string;
  email: string;
  passwordHash: string | null;
}

async function checkOwner(
  ctx: Pick<AppContext, 'db'>,
  input: { name: string; email: string; password?: string },
  kdf: Kdf,
  /** Where the inputs came from, as an error's details name them: 'body.' for a request's. */
  from = '',
): Promise<NewOwner> {
  const name = input.name.trim();
  const email = input.email.trim().toLowerCase();
  if (name === '' || name.length > 200) throw invalid('invalid_request', `${from}name`, 'must be 1 to 200 characters');
  if (!EMAIL.test(email) || email.length > 254)
    throw invalid('invalid_request', `${from}email`, 'must be an email address');
  if (input.password !== undefined && input.password.length < 8)
    throw invalid('invalid_request', `${from}password`, 'must be at least 8 characters');
  const passwordHash = input.password === undefined ? null : await hashPasswordFor(ctx.db, email, input.password, kdf);
  return { name, email, passwordHash };
}

/** The account row, its owner (named as the account) and its default theme. */
async function insertAccountWithOwner(
  trx: Executor,
  owner: NewOwner,
  parentAccountId: number | null,
  now: number,
): Promise<{ accountId: number; userId: number }> {
  const accountId = await repo.insertAccount(trx, owner.name, now, parentAccountId);
  await insertDefaultTheme(trx, accountId, now);
  const userId = await repo.insertUser(
    trx,
    { accountId, email: owner.email, name: owner.name, passwordHash: owner.passwordHash, role: 'owner' },
    now,
  );
  return { accountId, userId };
}

/**
 * An account with its owner, a first token and its default theme. kdf hashes the owner's
 * password, when there is one. parentAccountId makes it a subaccount of that account.
 */
export async function createAccount(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  input: { name: string; email: string; password?: string; parentAccountId?: number },
  kdf: Kdf,
): Promise<CreatedAccount> {
  const owner = await checkOwner(ctx, input, kdf);
  const token = newToken(PAT_PREFIX);
  const now = ctx.clock.now();
  return transact(ctx.db, async (trx) => {
    const { accountId, userId } = await insertAccountWithOwner(trx, owner, input.parentAccountId ?? null, now);
    await repo.insertToken(
      trx,
      {
        accountId,
        userId,
        hash: hashToken(token),
        kind: 'pat',
        name: 'initial',
        expiresAt: null,
        prefix: tokenPrefix(token),
      },
      now,
    );
    return { accountId, userId, token };
  });
}

/**
 * A subaccount of parentAccountId made through the API: its owner gets no token here (the
 * parent reaches the subaccount through the /subaccount routes; the owner signs in with the
 * password, or an operator makes a token with `formwork admin create-token`).
 */
export async function createSubaccountOf(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  parentAccountId: number,
  input: { name: string; email: string; password?: string },
  kdf: Kdf,
): Promise<{ accountId: number; userId: number }> {
  const owner = await checkOwner(ctx, input, kdf, 'body.');
  const now = ctx.clock.now();
  return transact(ctx.db, (trx) => insertAccountWithOwner(trx, owner, parentAccountId, now));
}

export async function createPersonalToken(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  userId: number,
  name = 'personal',
): Promise<{ tokenId: number; token: string }> {
  const token = newToken(PAT_PREFIX);
  const now = ctx.clock.now();
  return transact(ctx.db, async (trx) => {
    const user = await repo.findUser(trx, userId);
    if (!user) throw new NotFoundError('user_not_found');
    const tokenId = await repo.insertToken(
      trx,
      {
        accountId: user.account_id,
        userId,
        hash: hashToken(token),
        kind: 'pat',
        name,
        expiresAt: null,
        prefix: tokenPrefix(token),
      },
      now,
    );
    return { tokenId, token };
  });
}
