import type { AppContext } from '../../context.js';
import { hashToken, newToken } from '../../crypto/secrets.js';
import type { PortalRow, PortalUserRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { isoTime } from '../../http/schemas.js';
import { enqueuePortalSignin } from './jobs.js';
import * as repo from './repository.js';

/**
 * Signing in to a portal page (docs/portals.md): a portal user asks for a link by email; the
 * link is single use and expires; opening it starts a session, held by an opaque cookie whose
 * hash is the session row's key. Tokens are 256 random bits, kept only as SHA-256 hashes.
 */

/** How long a session lasts from sign-in. */
export const SESSION_TTL_MS = 7 * 24 * 3_600_000;

export const SESSION_COOKIE = 'fw_portal';

type Ctx = Pick<AppContext, 'db' | 'clock' | 'config'>;

/**
 * Asks for a sign-in link to the address: one job, whoever the address belongs to, so that the
 * request takes the same work and gives the same answer for any address. The job
 * (portals/jobs.ts) finds the user, if any, and sends the link.
 */
export async function requestSignin(ctx: Ctx, portal: PortalRow, email: string): Promise<void> {
  await transact(ctx.db, (trx) =>
    enqueuePortalSignin(trx, ctx.config.secretKey, { accountId: portal.account_id, portalId: portal.id, email }),
  );
}

/**
 * Opens a sign-in link: a new session for its user (the value of the cookie, and when it ends),
 * or undefined for a link that is unknown, used, expired or of another portal.
 */
export async function openSignin(
  ctx: Ctx,
  portal: PortalRow,
  token: string,
): Promise<{ session: string; expiresAt: number } | undefined> {
  return transact(ctx.db, async (trx) => {
    const now = ctx.clock.now();
    const user = await repo.useSigninToken(trx, portal.id, hashToken(token), now);
    if (!user) return undefined;
    const session = newToken('');
    const expiresAt = now + SESSION_TTL_MS;
    await repo.deleteExpiredSessions(trx, user.id, now);
    await repo.insertSession(
      trx,
      { token_hash: hashToken(session), portal_user_id: user.id, expires_at: expiresAt },
      now,
    );
    await repo.updatePortalUser(trx, user.id, { last_sign_in_at: now }, now);
    return { session, expiresAt };
  });
}

/** The portal user whose live session the cookie holds, when it is a session of this portal. */
export async function sessionUser(
  db: Executor,
  now: number,
  portal: Pick<PortalRow, 'id'>,
  session: string | undefined,
): Promise<PortalUserRow | undefined> {
  if (!session) return undefined;
  const user = await repo.sessionUser(db, hashToken(session), now);
  return user && user.portal_id === portal.id ? user : undefined;
}

export async function signOut(ctx: Ctx, session: string | undefined): Promise<void> {
  if (!session) return;
  await transact(ctx.db, (trx) => repo.deleteSession(trx, hashToken(session)));
}

/** What the portal page lists for its user: each live form, its due date and whether they have submitted it. */
export async function pageForms(
  ctx: Ctx,
  portal: PortalRow,
  user: PortalUserRow,
): Promise<
  {
    formId: number;
    name: string;
    viewKey: string;
    dueDate: string | null;
    overdue: boolean;
    required: boolean;
    submitted: { count: number; last: string } | null;
  }[]
> {
  const forms = await repo.portalForms(ctx.db, portal.id);
  const done = await repo.submittedBy(
    ctx.db,
    user.id,
    forms.map((f) => f.form_id),
  );
  const now = ctx.clock.now();
  return forms.map((f) => {
    const mine = done.get(f.form_id);
    return {
      formId: f.form_id,
      name: f.name,
      viewKey: f.view_key,
      dueDate: f.due_at === null ? null : isoTime(Number(f.due_at)),
      overdue: f.due_at !== null && Number(f.due_at) < now && !mine,
      required: f.required === 1,
      submitted: mine ? { count: mine.count, last: isoTime(mine.last) } : null,
    };
  });
}

/** The value of the portal session cookie in a Cookie header, if any. */
export function sessionCookie(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at === -1) continue;
    if (pair.slice(0, at).trim() === SESSION_COOKIE) {
      const value = pair.slice(at + 1).trim();
      return /^[A-Za-z0-9_-]{20,100}$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}

/**
 * Ties a submission made on the hosted page to the portal user signed in on this browser,
 * when the form is one of their portal's (live) forms; called in the submission's transaction.
 */
export async function tieToPortalUser(
  trx: Executor,
  now: number,
  session: string | undefined,
  formId: number,
  submissionId: number,
): Promise<void> {
  if (!session) return;
  const user = await repo.sessionUser(trx, hashToken(session), now);
  if (!user || !(await repo.portalHasLiveForm(trx, user.portal_id, formId))) return;
  await repo.tieSubmission(trx, { submission_id: submissionId, portal_user_id: user.id, form_id: formId }, now);
}
