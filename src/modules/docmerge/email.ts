import type { Readable } from 'node:stream';
import type { AppContext } from '../../context.js';
import { defineJob } from '../../jobs/kind.js';
import { insertMail } from '../emails/repository.js';
import { sendSmtp, smtpOf } from '../emails/transport.js';
import { EmailPayload } from './payload.js';
import * as repo from './repository.js';

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * Emails a made document to its integration's addresses: through SMTP_URL when set, else into
 * the mail log (which names the attachment; the bytes stay with the submission). A sealed
 * document (encrypted form) is never attached: the message says where it can be downloaded
 * with the password. One message per job (its Message-ID, and the mail log's job_id).
 */
export async function sendDocumentEmail(
  ctx: AppContext,
  jobId: number,
  p: EmailPayload,
  signal: AbortSignal,
): Promise<void> {
  const document = await repo.findDocument(ctx.db, p.accountId, p.submissionId, p.documentId);
  if (!document) return; // its submission was deleted since
  const { config } = ctx;
  const attach = document.sealed === 0 && document.size <= config.mailAttachmentMaxBytes;
  const where = `GET /api/v2025/submissions/${p.submissionId}/documents/${p.documentId}`;
  const text = attach
    ? `The document ${document.file_name} made from submission ${p.submissionId} is attached.`
    : `The document ${document.file_name} made from submission ${p.submissionId} is not attached ` +
      `(${document.sealed === 1 ? 'its form is encrypted' : 'it is over the size limit for attachments'}); ` +
      `download it at ${config.publicUrl}${where}.`;
  const from = { name: config.mailFrom.name ?? '', address: config.mailFrom.address };
  const smtp = smtpOf(config);
  if (smtp) {
    const content = attach ? await bytesOf((await ctx.storage.get(document.storage_key)).stream) : undefined;
    await sendSmtp(
      smtp,
      {
        from,
        to: p.to,
        replyTo: undefined,
        subject: p.subject,
        text,
        html: undefined,
        attachments: content ? [{ filename: document.file_name, content, contentType: document.content_type }] : [],
        messageId: `<formwork-document-${jobId}@${config.mailFrom.address.split('@')[1]}>`,
      },
      signal,
    );
    return;
  }
  await insertMail(ctx.db, {
    account_id: p.accountId,
    form_id: p.formId,
    email_id: null,
    submission_id: p.submissionId,
    job_id: jobId,
    kind: 'document',
    sender: from.name ? `${from.name} <${from.address}>` : from.address,
    recipients: JSON.stringify(p.to),
    reply_to: null,
    subject: p.subject,
    text_body: text,
    html_body: null,
    attachments: JSON.stringify(
      attach ? [{ name: document.file_name, size: document.size, contentType: document.content_type }] : [],
    ),
    created_at: ctx.clock.now(),
  });
}

/** The email of a made document (integration email.to); retried with the outbox's backoff. */
export const emailDocumentJob = defineJob({
  name: 'docmerge.email',
  payload: EmailPayload,
  maxAttempts: 8,
  concurrency: 4,
  handler: (ctx, job, tools) => sendDocumentEmail(ctx, job.id, job.payload, tools.signal),
});
