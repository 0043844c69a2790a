import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../../context.js';
import { serviceKey } from '../../crypto/envelope.js';
import { hashToken, newToken } from '../../crypto/secrets.js';
import type { PortalRow, PortalUserRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { isoTime } from '../../http/schemas.js';
import { enqueuePortalSignin } from './jobs.js';
import * as repo from './repository.js';

/**
 * Signing in to a portal page (docs/portals.md): a portal user asks for a link by email; the
 * link is single use and expires; opening it shows a page that asks to confirm, and the
 * confirmation (a POST from that page, in the same browser) starts a session, held by an
 * opaque cookie whose hash is the session row's key. Tokens are 256 random bits, kept only as
 * SHA-256 hashes.
 *
 * The confirmation step is against login CSRF: a link that signs in on a plain GET lets
 * anyone who holds one (for an account of their own) sign another person's browser in to it by
 * making that browser open it, and what that person then submits goes to the other account.
 * The POST must carry a token that is an HMAC of a random cookie set with the page
 * (SameSite=Lax, so another site's POST does not carry it), and is refused when the browser
 * says it comes from another site.
 */

/** How long a session lasts from sign-in. */
export const SESSION_TTL_MS = 7 * 24 * 3_600_000;

export const SESSION_COOKIE = 'fw_portal';

/** The random value that the confirmation page's token is bound to, set with the page. */
export const CONFIRM_COOKIE = 'fw_portal_confirm';

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

/** The user whom a sign-in link would sign in, without using it up: what the confirmation page shows. */
export async function peekSignin(ctx: Ctx, portal: PortalRow, token: string): Promise<PortalUserRow | undefined> {
  return repo.findLiveSigninToken(ctx.db, portal.id, hashToken(token), ctx.clock.now());
}

/** A new value for the confirmation cookie. */
export function newConfirmNonce(): string {
  return randomBytes(24).toString('base64url');
}

/** The token of the confirmation page: bound to the browser's cookie, the portal and SECRET_KEY. */
export function confirmToken(secretKey: string, portalId: number, nonce: string): string {
  return createHmac('sha256', serviceKey(secretKey, 'portal sign-in confirmation'))
    .update(`${portalId}.${nonce}`)
    .digest('base64url');
}

/** Whether the posted token is the one for this browser's cookie. */
export function confirmTokenValid(secretKey: string, portalId: number, nonce: string | undefined, token: unknown) {
  if (nonce === undefined || typeof token !== 'string') return false;
  const want = Buffer.from(confirmToken(secretKey, portalId, nonce));
  const got = Buffer.from(token);
  return got.length === want.length && timingSafeEqual(got, want);
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

/** The value of a cookie of ours (an opaque base64url token) in a Cookie header, if any. */
export function tokenCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at === -1) continue;
    if (pair.slice(0, at).trim() === name) {
      const value = pair.slice(at + 1).trim();
      return /^[A-Za-z0-9_-]{20,100}$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}

/** The value of the portal session cookie in a Cookie header, if any. */
export function sessionCookie(header: string | undefined): string | undefined {
  return tokenCookie(header, SESSION_COOKIE);
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
