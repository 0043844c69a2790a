import type { AppContext } from '../../context.js';
import { insertMail, type NewMailLogRow } from './repository.js';
import { sendSmtp, smtpOf } from './transport.js';

export interface LinkMessage {
  subject: string;
  text: string;
  html: string;
}

export interface LinkMail {
  /** The job that sends it: its id names the message, so a retried job sends the same one. */
  jobId: number;
  to: string;
  /** Tells the message ids of this kind of mail apart (formwork-<tag>-<job id>@...). */
  tag: string;
  /** The message with the link in it, or with the text that stands for it in the mail log. */
  compose: (link: string) => LinkMessage;
  link: string;
  /** What the mail log shows in place of the link: the log is the owner's, the link its recipient's. */
  withheld: string;
  /** The mail log row's own columns. */
  log: Pick<NewMailLogRow, 'account_id' | 'form_id' | 'kind' | 'partial_submission_id' | 'portal_id'>;
}

/**
 * Sends a mail that carries a personal link (a resume link, a portal sign-in link): through
 * SMTP_URL when set, else into the mail log with the link withheld.
 */
export async function sendLinkMail(ctx: AppContext, mail: LinkMail, signal: AbortSignal): Promise<void> {
  const { config } = ctx;
  const from = { name: config.mailFrom.name ?? '', address: config.mailFrom.address };
  const smtp = smtpOf(config);
  if (smtp) {
    await sendSmtp(
      smtp,
      {
        ...mail.compose(mail.link),
        from,
        to: [mail.to],
        replyTo: undefined,
        attachments: [],
        messageId: `<formwork-${mail.tag}-${mail.jobId}@${config.mailFrom.address.split('@')[1]}>`,
      },
      signal,
    );
    return;
  }
  const logged = mail.compose(mail.withheld);
  await insertMail(ctx.db, {
    email_id: null,
    submission_id: null,
    ...mail.log,
    job_id: mail.jobId,
    sender: from.name ? `${from.name} <${from.address}>` : from.address,
    recipients: JSON.stringify([mail.to]),
    reply_to: null,
    subject: logged.subject,
    text_body: logged.text,
    html_body: logged.html,
    attachments: '[]',
    created_at: ctx.clock.now(),
  });
}
