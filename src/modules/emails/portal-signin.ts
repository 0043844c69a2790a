import { Type, type Static } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { decryptWith, encryptWith, serviceKey } from '../../crypto/envelope.js';
import type { Executor } from '../../db/transaction.js';
import { defineJob } from '../../jobs/kind.js';
import { enqueue } from '../../jobs/outbox.js';
import { findPortalUser } from '../portals/repository.js';
import * as repo from './repository.js';
import { escapeHtml } from './template.js';
import { sendSmtp } from './transport.js';

/**
 * A portal sign-in link (docs/portals.md), emailed to a portal user who asked for it on the
 * portal page. The address and the link are sealed in the job's payload with a key derived
 * from SECRET_KEY, as resume links are: the link signs its holder in, and the service
 * otherwise keeps only its hash.
 */
export const PortalSigninPayload = Type.Object({
  accountId: Type.Integer(),
  portalId: Type.Integer(),
  portalUserId: Type.Integer(),
  /** base64 AES-256-GCM of {"to", "url", "portalName", "userName"}, bound to the account and the user. */
  sealed: Type.String(),
});
export type PortalSigninPayload = Static<typeof PortalSigninPayload>;

interface Sealed {
  to: string;
  url: string;
  portalName: string;
  userName: string;
  minutes: number;
}

const PURPOSE = 'portal sign-in links';
const aad = (accountId: number, userId: number) => `formwork portal sign-in ${accountId} ${userId}`;

function open(secretKey: string, p: PortalSigninPayload): Sealed {
  const plain = decryptWith(
    serviceKey(secretKey, PURPOSE),
    Buffer.from(p.sealed, 'base64'),
    aad(p.accountId, p.portalUserId),
  );
  return JSON.parse(plain.toString()) as Sealed;
}

/** What the mail log keeps in place of the link: the log is the owner's, the link the portal user's. */
export const WITHHELD_SIGNIN_LINK = '[the sign-in link is withheld from the mail log]';

function compose(s: Sealed, url: string) {
  const subject = `Your sign-in link for “${s.portalName}”`.replace(/\s+/g, ' ').slice(0, 998);
  const text =
    `Hello ${s.userName},\n\n` +
    `Open this link to sign in to “${s.portalName}”:\n${url}\n\n` +
    `The link works once, within ${s.minutes} minutes. ` +
    'If you did not ask for it, you can ignore this message: nobody can sign in without it.';
  const html =
    `<p>Hello ${escapeHtml(s.userName)},</p>` +
    `<p><a href="${escapeHtml(url)}">Sign in to “${escapeHtml(s.portalName)}”</a></p>` +
    `<p>Or copy this link: ${escapeHtml(url)}</p>` +
    `<p>The link works once, within ${s.minutes} minutes. ` +
    'If you did not ask for it, you can ignore this message: nobody can sign in without it.</p>';
  return { subject, text, html };
}

/**
 * Sends one sign-in link: through SMTP_URL when set, else into the mail log with the link
 * withheld. Nothing is sent once the user is gone from the portal.
 */
async function sendPortalSignin(ctx: AppContext, jobId: number, p: PortalSigninPayload): Promise<void> {
  const user = await findPortalUser(ctx.db, p.portalId, p.portalUserId);
  if (!user) return;
  const sealed = open(ctx.config.secretKey, p);
  const { config } = ctx;
  const from = { name: config.mailFrom.name ?? '', address: config.mailFrom.address };
  if (config.smtpUrl) {
    await sendSmtp(config.smtpUrl, {
      ...compose(sealed, sealed.url),
      from,
      to: [sealed.to],
      replyTo: undefined,
      attachments: [],
      messageId: `<formwork-portal-${jobId}@${config.mailFrom.address.split('@')[1]}>`,
    });
    return;
  }
  const logged = compose(sealed, WITHHELD_SIGNIN_LINK);
  await repo.insertMail(ctx.db, {
    account_id: p.accountId,
    form_id: null,
    email_id: null,
    submission_id: null,
    portal_id: p.portalId,
    job_id: jobId,
    kind: 'portal_signin',
    sender: from.name ? `${from.name} <${from.address}>` : from.address,
    recipients: JSON.stringify([sealed.to]),
    reply_to: null,
    subject: logged.subject,
    text_body: logged.text,
    html_body: logged.html,
    attachments: '[]',
    created_at: ctx.clock.now(),
  });
}

export const sendPortalSigninJob = defineJob({
  name: 'emails.portal_signin',
  payload: PortalSigninPayload,
  maxAttempts: 8,
  handler: (ctx, job) => sendPortalSignin(ctx, job.id, job.payload),
});

/** Enqueues the email in the transaction that stored the link's hash: it goes if and only if that commits. */
export async function enqueuePortalSigninEmail(
  trx: Executor,
  secretKey: string,
  r: { accountId: number; portalId: number; portalUserId: number } & Sealed,
): Promise<void> {
  const { accountId, portalId, portalUserId, ...value } = r;
  await enqueue(trx, sendPortalSigninJob, {
    accountId,
    portalId,
    portalUserId,
    sealed: encryptWith(
      serviceKey(secretKey, PURPOSE),
      Buffer.from(JSON.stringify(value)),
      aad(accountId, portalUserId),
    ).toString('base64'),
  });
}
