import { createHmac } from 'node:crypto';
import type { AppContext } from '../../context.js';
import { serviceKey } from '../../crypto/envelope.js';
import { hashToken } from '../../crypto/secrets.js';
import { transact } from '../../db/transaction.js';
import * as repo from './repository.js';
import { emailKey } from './service.js';

/** How long a sign-in link works. */
export const SIGNIN_LINK_TTL_MS = 30 * 60_000;
/** At most this many links go to one portal user per hour; past it, requests send nothing (and say the same). */
export const SIGNIN_LINKS_PER_USER_PER_HOUR = 5;
const HOUR_MS = 3_600_000;

export interface SigninLink {
  to: string;
  url: string;
  portalName: string;
  userName: string;
  minutes: number;
}

/**
 * The sign-in link that the job of one request sends: undefined when the address is no user
 * of the portal (any more), or the user's links for the hour are used up. Run by the job, not
 * the request, so that the request does the same work whoever the address belongs to.
 *
 * The token is derived from the job's id (an HMAC with a key from SECRET_KEY), so a job that
 * runs again after a failed send makes the same link, one row, counted once.
 */
export async function issueSigninLink(
  ctx: Pick<AppContext, 'db' | 'clock' | 'config'>,
  jobId: number,
  target: { accountId: number; portalId: number; email: string },
): Promise<SigninLink | undefined> {
  const portal = await repo.findPortal(ctx.db, target.accountId, target.portalId);
  const user = portal && (await repo.findPortalUserByEmail(ctx.db, portal.id, emailKey(target.email)));
  if (!portal || !user) return undefined;
  const token = createHmac('sha256', serviceKey(ctx.config.secretKey, 'portal sign-in links'))
    .update(`${portal.id}:${jobId}`)
    .digest('base64url');
  const hash = hashToken(token);
  const issued = await transact(ctx.db, async (trx) => {
    const now = ctx.clock.now();
    // Jobs of one user that run at once count their links one after the other.
    await repo.lockPortalUser(trx, user.id);
    if (await repo.hasSigninToken(trx, hash)) return true;
    if ((await repo.countSigninTokensSince(trx, user.id, now - HOUR_MS)) >= SIGNIN_LINKS_PER_USER_PER_HOUR)
      return false;
    await repo.deleteSpentSigninTokens(trx, user.id, now, now - HOUR_MS);
    await repo.insertSigninToken(
      trx,
      { token_hash: hash, portal_user_id: user.id, expires_at: now + SIGNIN_LINK_TTL_MS },
      now,
    );
    return true;
  });
  if (!issued) return undefined;
  return {
    to: user.email,
    url: `${ctx.config.publicUrl}/p/${portal.portal_key}/signin?token=${encodeURIComponent(token)}`,
    portalName: portal.name,
    userName: user.name,
    minutes: Math.round(SIGNIN_LINK_TTL_MS / 60_000),
  };
}
