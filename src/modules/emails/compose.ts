import type { EmailToSend } from './repository.js';
import type { PayloadEntry, SubmissionEmail } from './payload.js';
import { EMAIL } from '../submissions/values.js';
import { escapeHtml } from './template.js';
import { renderTemplates } from './threaded-render.js';

export const SEALED_NOTE =
  'This form is encrypted, so its emails carry no values. Read the submission in Formwork with the form’s password.';

export interface Composed {
  to: string[];
  replyTo: string | undefined;
  subject: string;
  text: string;
  html: string | undefined;
}

function addressIn(data: readonly PayloadEntry[], fieldId: number | null): string | undefined {
  if (fieldId === null) return undefined;
  const value = data.find((e) => e.field === fieldId)?.value;
  return typeof value === 'string' && EMAIL.test(value.trim()) ? value.trim() : undefined;
}

/** Where a confirmation goes: the address in its email field, if the submission holds one. */
export function confirmationAddress(data: readonly PayloadEntry[], fieldId: number | null): string | undefined {
  return addressIn(data, fieldId);
}

function allFields(data: PayloadEntry[], html: boolean): string {
  if (!html) return data.map((e) => `${e.label}: ${e.displayValue}`).join('\n');
  const rows = data.map(
    (e) =>
      `<tr><th align="left" valign="top">${escapeHtml(e.label)}</th><td>${escapeHtml(e.displayValue).replace(/\r?\n/g, '<br>')}</td></tr>`,
  );
  return `<table cellpadding="4" cellspacing="0">${rows.join('')}</table>`;
}

/**
 * The merge tags (docs/emails.md). In HTML every value is escaped here, once, so a template
 * cannot forget to; `all_fields` is the one piece of markup, built from escaped values.
 */
export function mergeVariables(p: SubmissionEmail, formName: string, html: boolean): Record<string, unknown> {
  const esc = html ? escapeHtml : (s: string) => s;
  const data = p.sealed ? [] : p.data;
  const byId = data.map((e) => [`field_${e.field}`, esc(e.displayValue)] as const);
  // fromEntries makes own properties even of labels such as "__proto__".
  const fields = Object.fromEntries([
    ...data.map((e) => [String(e.field), esc(e.displayValue)] as const),
    ...[...data].reverse().map((e) => [e.label, esc(e.displayValue)] as const),
  ]);
  return {
    ...Object.fromEntries(byId),
    fields,
    form_id: p.formId,
    form_name: esc(formName),
    submission_id: p.submissionId,
    submission_time: p.timestamp,
    all_fields: p.sealed ? esc(SEALED_NOTE) : allFields(data, html),
  };
}

/**
 * The email to send for one submission: its addresses, and its templates rendered in the
 * render thread; undefined when it has no address to go to (a confirmation whose submission
 * holds none), which renders nothing.
 */
export async function composeEmail(
  email: EmailToSend,
  p: SubmissionEmail,
  formName: string,
): Promise<Composed | undefined> {
  const data = p.sealed ? [] : p.data;
  const to =
    email.kind === 'confirmation'
      ? [confirmationAddress(data, email.recipient_field_id)].filter((a): a is string => a !== undefined)
      : (JSON.parse(email.recipients) as string[]);
  const replyTo =
    (email.kind === 'notification' ? addressIn(data, email.reply_to_field_id) : undefined) ??
    email.reply_to ??
    undefined;
  if (to.length === 0) return undefined;
  const textVariables = mergeVariables(p, formName, false);
  const rendered = await renderTemplates({
    format: email.format,
    subject: email.subject,
    message: email.message,
    textVariables,
    htmlVariables: email.format === 'html' ? mergeVariables(p, formName, true) : textVariables,
  });
  return { to, replyTo, subject: rendered.subject!, text: rendered.text!, html: rendered.html };
}
