import type { Readable } from 'node:stream';
import type { AppContext } from '../../context.js';
import { FinalFailure } from '../../jobs/retry.js';
import type { JobTools } from '../../jobs/types.js';
import { sealsNewData } from '../encryption/keys.js';
import { fileRefs, type FileRef } from '../submissions/values.js';
import { composeEmail, type Composed } from './compose.js';
import { sealedEmailPayload, unpackEmailPayload, type SendEmailPayload, type SubmissionEmail } from './payload.js';
import * as repo from './repository.js';
import { escapeHtml, TemplateLimitError } from './template.js';
import { sendSmtp, smtpOf, type OutgoingMail } from './transport.js';

interface Attachments {
  files: { filename: string; content: Buffer | undefined; contentType: string; size: number }[];
  left: string[];
}

async function bytes(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * The submission's files, in order, while they fit in MAIL_ATTACHMENT_MAX_BYTES together;
 * the others are named in the message instead. Files that the submission no longer holds
 * (it was edited or deleted since) are named too. The bytes are read only for SMTP: the mail
 * log names the files, which stay with the submission.
 */
async function attachmentsOf(ctx: AppContext, p: SubmissionEmail, read: boolean): Promise<Attachments> {
  const refs: FileRef[] = p.data.flatMap((e) => fileRefs(e.value) ?? []);
  const stored = new Map(
    (
      await repo.storedFiles(
        ctx.db,
        p.accountId,
        p.submissionId,
        refs.map((r) => r.fileKey),
      )
    ).map((s) => [s.file_key, s]),
  );
  let room = ctx.config.mailAttachmentMaxBytes;
  const out: Attachments = { files: [], left: [] };
  for (const ref of refs) {
    const object = stored.get(ref.fileKey);
    const size = object?.size ?? ref.size;
    if (!object || object.sealed === 1 || size > room) {
      out.left.push(ref.name);
      continue;
    }
    const content = read ? await bytes((await ctx.storage.get(object.storage_key)).stream) : undefined;
    out.files.push({ filename: ref.name, content, contentType: ref.contentType, size });
    room -= size;
  }
  return out;
}

function noteLeftFiles(mail: Composed, left: string[]): Composed {
  if (left.length === 0) return mail;
  const note = `Files not attached (over the size limit for attachments, or no longer held): ${left.join(', ')}`;
  return {
    ...mail,
    text: `${mail.text}\n\n${note}`,
    html: mail.html === undefined ? undefined : `${mail.html}\n<p>${escapeHtml(note)}</p>`,
  };
}

/** Why an email of a deleted form is not sent (the job's error). */
const FORM_DELETED = 'not sent: the form was deleted';

/**
 * Sends one email of one submission (the emails.send job): through SMTP_URL when it is set,
 * else into the mail log. Runs at least once: the log keeps one message per job, and SMTP
 * messages carry a Message-ID per job.
 *
 * Sends nothing for an email deleted since the submission (its owner no longer wants it: the
 * job ends), nor for a form deleted since (its owner can no longer see or stop the email; a
 * restored form's later submissions send as usual): that job fails for good, saying so. A job written before its form was encrypted
 * carries the values in the clear: it sends what an encrypted form's email does, and its
 * payload keeps no values from then on. A template stopped by a limit fails the job for good:
 * the same template and values would be stopped on every attempt.
 */
export async function sendSubmissionEmail(
  ctx: AppContext,
  jobId: number,
  stored: SendEmailPayload,
  tools: Pick<JobTools<SendEmailPayload>, 'signal' | 'atEnd' | 'replacePayload'>,
): Promise<void> {
  const email = await repo.emailToSend(ctx.db, stored.accountId, stored.kind, stored.emailId);
  if (!email) return; // deleted since the submission: the owner no longer wants it sent
  if (email.form_deleted_at !== null) throw new FinalFailure(FORM_DELETED);
  let p: SubmissionEmail;
  if (!stored.sealed && sealsNewData(email)) {
    const sealed = sealedEmailPayload(stored);
    tools.atEnd((trx) => tools.replacePayload(sealed, trx));
    p = unpackEmailPayload(sealed);
  } else p = unpackEmailPayload(stored);
  let composed: Composed | undefined;
  try {
    composed = await composeEmail(email, p, email.form_name ?? '');
  } catch (error) {
    if (error instanceof TemplateLimitError)
      throw new FinalFailure(`the ${error.part ?? 'templates'} could not be rendered: ${error.message}`);
    throw error;
  }
  if (!composed) return;
  const { config } = ctx;
  const smtp = smtpOf(config);
  const attachments: Attachments =
    email.attach_files === 1 && !p.sealed ? await attachmentsOf(ctx, p, smtp !== undefined) : { files: [], left: [] };
  const mail = noteLeftFiles(composed, attachments.left);
  const from = { name: email.sender_name || config.mailFrom.name || '', address: config.mailFrom.address };
  const outgoing: OutgoingMail = {
    ...mail,
    from,
    attachments: attachments.files.map((a) => ({
      filename: a.filename,
      content: a.content ?? Buffer.alloc(0),
      contentType: a.contentType,
    })),
    messageId: `<formwork-email-${jobId}@${config.mailFrom.address.split('@')[1]}>`,
  };
  if (smtp) {
    await sendSmtp(smtp, outgoing, tools.signal);
    return;
  }
  await repo.insertMail(ctx.db, {
    account_id: p.accountId,
    form_id: p.formId,
    email_id: p.emailId,
    submission_id: p.submissionId,
    job_id: jobId,
    kind: p.kind,
    sender: from.name ? `${from.name} <${from.address}>` : from.address,
    recipients: JSON.stringify(mail.to),
    reply_to: mail.replyTo ?? null,
    subject: mail.subject,
    text_body: mail.text,
    html_body: mail.html ?? null,
    attachments: JSON.stringify(
      attachments.files.map((a) => ({ name: a.filename, size: a.size, contentType: a.contentType })),
    ),
    created_at: ctx.clock.now(),
  });
}
