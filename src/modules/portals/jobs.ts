import { Type, type Static } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { decryptWith, encryptWith, serviceKey } from '../../crypto/envelope.js';
import type { Executor } from '../../db/transaction.js';
import { defineChore, defineJob } from '../../jobs/kind.js';
import { enqueue } from '../../jobs/outbox.js';
import { sendLinkMail } from '../emails/link-mail.js';
import { escapeHtml } from '../emails/template.js';
import { deleteExpiredSignins } from './repository.js';
import { issueSigninLink, type SigninLink } from './signin-link.js';
import { DAY_MS } from '../../time-units.js';

/**
 * A request for a portal sign-in link (docs/portals.md), made on the portal page. Every
 * request with a well-formed address is one job, whoever the address belongs to; the job
 * finds the user, makes the link (signin-link.ts) and emails it. The address is sealed in the
 * payload with a key derived from SECRET_KEY, as resume links' are.
 */
export const PortalSigninPayload = Type.Object({
  accountId: Type.Integer(),
  portalId: Type.Integer(),
  /** base64 AES-256-GCM of {"email"}, bound to the account and the portal. */
  sealed: Type.String(),
});
export type PortalSigninPayload = Static<typeof PortalSigninPayload>;

const PURPOSE = 'portal sign-in requests';
const aad = (accountId: number, portalId: number) => `formwork portal sign-in ${accountId} ${portalId}`;

/** What the mail log keeps in place of the link: the log is the owner's, the link the portal user's. */
export const WITHHELD_SIGNIN_LINK = '[the sign-in link is withheld from the mail log]';

function compose(link: SigninLink, url: string) {
  const subject = `Your sign-in link for “${link.portalName}”`.replace(/\s+/g, ' ').slice(0, 998);
  const warning = 'If you did not ask for it, you can ignore this message: nobody can sign in without it.';
  const text =
    `Hello ${link.userName},\n\n` +
    `Open this link to sign in to “${link.portalName}”:\n${url}\n\n` +
    `The link works once, within ${link.minutes} minutes. ${warning}`;
  const html =
    `<p>Hello ${escapeHtml(link.userName)},</p>` +
    `<p><a href="${escapeHtml(url)}">Sign in to “${escapeHtml(link.portalName)}”</a></p>` +
    `<p>Or copy this link: ${escapeHtml(url)}</p>` +
    `<p>The link works once, within ${link.minutes} minutes. ${warning}</p>`;
  return { subject, text, html };
}

/**
 * Sends the link of one request: through SMTP_URL when set, else into the mail log with the
 * link withheld. Nothing is sent when the address is no user of the portal, or the user's
 * links for the hour are used up.
 */
async function sendPortalSignin(
  ctx: AppContext,
  jobId: number,
  p: PortalSigninPayload,
  signal: AbortSignal,
): Promise<void> {
  const { email } = JSON.parse(
    decryptWith(
      serviceKey(ctx.config.secretKey, PURPOSE),
      Buffer.from(p.sealed, 'base64'),
      aad(p.accountId, p.portalId),
    ).toString(),
  ) as { email: string };
  const link = await issueSigninLink(ctx, jobId, { accountId: p.accountId, portalId: p.portalId, email });
  if (!link) return;
  await sendLinkMail(
    ctx,
    {
      jobId,
      to: link.to,
      tag: 'portal',
      compose: (url) => compose(link, url),
      link: link.url,
      withheld: WITHHELD_SIGNIN_LINK,
      log: { account_id: p.accountId, form_id: null, kind: 'portal_signin', portal_id: p.portalId },
    },
    signal,
  );
}

export const sendPortalSigninJob = defineJob({
  name: 'emails.portal_signin',
  payload: PortalSigninPayload,
  maxAttempts: 8,
  handler: (ctx, job, tools) => sendPortalSignin(ctx, job.id, job.payload, tools.signal),
});

export async function enqueuePortalSignin(
  trx: Executor,
  secretKey: string,
  r: { accountId: number; portalId: number; email: string },
): Promise<void> {
  await enqueue(trx, sendPortalSigninJob, {
    accountId: r.accountId,
    portalId: r.portalId,
    sealed: encryptWith(
      serviceKey(secretKey, PURPOSE),
      Buffer.from(JSON.stringify({ email: r.email })),
      aad(r.accountId, r.portalId),
    ).toString('base64'),
  });
}

/**
 * Deletes sign-in links and sessions of every portal a day after they expired, once a day.
 * A link expires 30 minutes after it was made, so those still counted against the hourly
 * limit of links (signin-link.ts) are never among them; the day's margin is no more than
 * that, and costs a few rows.
 */
export const prunePortalSigninsJob = defineChore({
  name: 'portals.prune',
  everyMs: DAY_MS,
  run: (ctx) => deleteExpiredSignins(ctx.db, ctx.clock.now() - DAY_MS),
});
