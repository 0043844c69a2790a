import type { AppContext } from '../../context.js';
import type { Kdf } from '../../crypto/hasher.js';
import { hashToken, newToken } from '../../crypto/secrets.js';
import { transact } from '../../db/transaction.js';
import { invalid, NotFoundError } from '../../errors.js';
import { hashPasswordFor } from '../users/service.js';
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

/** kdf hashes the owner's password, when there is one. */
export async function createAccount(
  ctx: Pick<AppContext, 'db' | 'clock'>,
  input: { name: string; email: string; password?: string },
  kdf: Kdf,
): Promise<CreatedAccount> {
  const name = input.name.trim();
  const email = input.email.trim().toLowerCase();
  if (name === '' || name.length > 200) throw invalid('invalid_request', 'name', 'must be 1 to 200 characters');
  if (!EMAIL.test(email) || email.length > 254) throw invalid('invalid_request', 'email', 'must be an email address');
  if (input.password !== undefined && input.password.length < 8)
    throw invalid('invalid_request', 'password', 'must be at least 8 characters');
  const passwordHash = input.password === undefined ? null : await hashPasswordFor(ctx.db, email, input.password, kdf);
  const token = newToken(PAT_PREFIX);
  const now = ctx.clock.now();
  return transact(ctx.db, async (trx) => {
    const accountId = await repo.insertAccount(trx, name, now);
    const userId = await repo.insertUser(trx, { accountId, email, name, passwordHash, role: 'owner' }, now);
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
