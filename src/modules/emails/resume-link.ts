import { Type, type Static } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { decryptWith, encryptWith, serviceKey } from '../../crypto/envelope.js';
import type { Executor } from '../../db/transaction.js';
import { defineJob } from '../../jobs/kind.js';
import { enqueue } from '../../jobs/outbox.js';
import { findPartial } from '../partials/repository.js';
import * as repo from './repository.js';
import { sendLinkMail } from './link-mail.js';
import { escapeHtml } from './template.js';

/**
 * The resume link of a partial submission, emailed to the address the respondent gave on the
 * hosted page (docs/hosted.md). The address and the link are sealed in the job's payload with
 * a key derived from SECRET_KEY: the link opens the partial (on an encrypted form it is the
 * key to the respondent's copy), and the service otherwise keeps only its hash.
 */
export const ResumeLinkPayload = Type.Object({
  accountId: Type.Integer(),
  formId: Type.Integer(),
  partialSubmissionId: Type.Integer(),
  /** base64 AES-256-GCM of {"to", "url"}, bound to the account and the partial. */
  sealed: Type.String(),
});
export type ResumeLinkPayload = Static<typeof ResumeLinkPayload>;

interface Sealed {
  to: string;
  url: string;
}

const aad = (accountId: number, partialId: number) => `formwork resume link ${accountId} ${partialId}`;

function seal(secretKey: string, accountId: number, partialId: number, value: Sealed): string {
  return encryptWith(
    serviceKey(secretKey, 'resume links'),
    Buffer.from(JSON.stringify(value)),
    aad(accountId, partialId),
  ).toString('base64');
}

function open(secretKey: string, p: ResumeLinkPayload): Sealed {
  const plain = decryptWith(
    serviceKey(secretKey, 'resume links'),
    Buffer.from(p.sealed, 'base64'),
    aad(p.accountId, p.partialSubmissionId),
  );
  return JSON.parse(plain.toString()) as Sealed;
}

/** What the mail log keeps in place of the link: the log is the owner's, the link the respondent's. */
export const WITHHELD_LINK = '[the resume link is withheld from the mail log]';

function compose(formName: string, url: string) {
  const subject = `Your link to finish “${formName}”`.replace(/\s+/g, ' ').slice(0, 998);
  const text =
    `You saved your answers to “${formName}” to finish later.\n\n` +
    `Open this link to continue where you left off:\n${url}\n\n` +
    'Anyone with this link can see and change your saved answers, so keep it to yourself. ' +
    'If you did not ask for it, you can ignore this message.';
  const html =
    `<p>You saved your answers to “${escapeHtml(formName)}” to finish later.</p>` +
    `<p><a href="${escapeHtml(url)}">Continue where you left off</a></p>` +
    `<p>Or copy this link: ${escapeHtml(url)}</p>` +
    '<p>Anyone with this link can see and change your saved answers, so keep it to yourself. ' +
    'If you did not ask for it, you can ignore this message.</p>';
  return { subject, text, html };
}

/**
 * Sends one resume link: through SMTP_URL when set, else into the mail log with the link
 * withheld. Nothing is sent once the partial is gone (submitted, deleted or expired): its
 * link would open an empty form.
 */
async function sendResumeLink(
  ctx: AppContext,
  jobId: number,
  p: ResumeLinkPayload,
  signal: AbortSignal,
): Promise<void> {
  const partial = await findPartial(ctx.db, p.accountId, p.partialSubmissionId, ctx.clock.now());
  if (!partial) return;
  const formName = (await repo.formName(ctx.db, p.accountId, p.formId)) ?? '';
  const { to, url } = open(ctx.config.secretKey, p);
  await sendLinkMail(
    ctx,
    {
      jobId,
      to,
      tag: 'resume',
      compose: (link) => compose(formName, link),
      link: url,
      withheld: WITHHELD_LINK,
      log: {
        account_id: p.accountId,
        form_id: p.formId,
        kind: 'resume_link',
        partial_submission_id: p.partialSubmissionId,
      },
    },
    signal,
  );
}

export const sendResumeLinkJob = defineJob({
  name: 'emails.resume_link',
  payload: ResumeLinkPayload,
  maxAttempts: 8,
  handler: (ctx, job, tools) => sendResumeLink(ctx, job.id, job.payload, tools.signal),
});

/** Enqueues the email in the transaction of the save that made the link: it goes if and only if the save commits. */
export async function enqueueResumeLinkEmail(
  trx: Executor,
  ctx: AppContext,
  r: { accountId: number; formId: number; partialSubmissionId: number; to: string; url: string },
): Promise<void> {
  await enqueue(trx, sendResumeLinkJob, {
    accountId: r.accountId,
    formId: r.formId,
    partialSubmissionId: r.partialSubmissionId,
    sealed: seal(ctx.config.secretKey, r.accountId, r.partialSubmissionId, { to: r.to, url: r.url }),
  });
}
