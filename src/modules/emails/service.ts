import type { AppContext } from '../../context.js';
import type { FieldRow, FormEmailRow, MailLogRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, NotFoundError, type ErrorDetail } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { logicProblems, toSibling } from '../fields/definition.js';
import { listFields } from '../fields/repository.js';
import { lockForm, reviseForm } from '../forms/repository.js';
import { requireForm } from '../forms/service.js';
import type { AccountScope, FormRef } from '../permissions/caller.js';
import * as repo from './repository.js';
import {
  MAX_EMAILS_PER_FORM,
  type Confirmation,
  type EmailInput,
  type EmailKind,
  type EmailPreview,
  type MailListQuery,
  type MailMessage,
  type Notification,
} from './schemas.js';
import { mergeVariables } from './compose.js';
import { TemplateLimitError, templateProblem, templateProblems } from './template.js';
import { renderTemplates } from './threaded-render.js';

const NOT_FOUND = { confirmation: 'confirmation_not_found', notification: 'notification_not_found' } as const;

function common(row: FormEmailRow) {
  return {
    id: row.id,
    formId: row.form_id,
    name: row.name,
    senderName: row.sender_name,
    replyTo: row.reply_to,
    subject: row.subject,
    message: row.message,
    format: row.format,
    logic: row.logic === null ? null : (JSON.parse(row.logic) as Confirmation['logic']),
    attachFiles: row.attach_files === 1,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

export function toConfirmation(row: FormEmailRow): Confirmation {
  return { ...common(row), recipientField: row.recipient_field_id ?? 0 };
}

export function toNotification(row: FormEmailRow): Notification {
  return {
    ...common(row),
    recipients: JSON.parse(row.recipients) as string[],
    replyToField: row.reply_to_field_id,
  };
}

type EmailRecord<K extends EmailKind> = K extends 'confirmation' ? Confirmation : Notification;

function present<K extends EmailKind>(kind: K, row: FormEmailRow): EmailRecord<K> {
  return (kind === 'confirmation' ? toConfirmation(row) : toNotification(row)) as EmailRecord<K>;
}

async function requireEmail(db: Executor, accountId: number, kind: EmailKind, id: number): Promise<FormEmailRow> {
  const row = await repo.findEmail(db, accountId, kind, id);
  if (!row) throw new NotFoundError(NOT_FOUND[kind]);
  // An email of a deleted form is gone with it, as the form's fields are.
  await requireForm(db, { accountId }, { formId: row.form_id }).catch((error: unknown) => {
    throw error instanceof NotFoundError ? new NotFoundError(NOT_FOUND[kind]) : error;
  });
  return row;
}

/**
 * Checks what the input refers to among the form's fields, and its templates. A field id of no
 * field of this form is a 404, as any unknown id in a body; a field of the wrong type, a bad
 * logic check or a template that does not parse is a 400 naming each. Only what is sent is
 * checked: an email whose recipient field was deleted since can still be renamed.
 */
function check(merged: EmailInput, fields: FieldRow[], tooCostly: ErrorDetail[]): void {
  const byId = new Map(fields.map((f) => [f.id, f]));
  const problems: ErrorDetail[] = [];
  for (const property of ['recipientField', 'replyToField'] as const) {
    const id = merged[property];
    if (id === undefined || id === null) continue;
    const field = byId.get(id);
    if (!field) throw new NotFoundError('field_not_found', `${property}: no field ${id} in this form`);
    if (field.type !== 'email')
      problems.push({
        property: `body.${property}`,
        message: `must be an email field; ${id} is a ${field.type} field`,
      });
  }
  if (merged.logic) {
    const siblings = new Map(fields.map((f) => [f.id, toSibling(f)]));
    problems.push(...logicProblems(merged.logic, 'body', siblings, undefined));
  }
  if (problems.length > 0) {
    const first = problems[0]!;
    throw new BadRequestError('invalid_email', `${first.property}: ${first.message}`, { details: problems });
  }
  const broken = [
    ...templateProblems({ 'body.subject': merged.subject, 'body.message': merged.message }),
    ...tooCostly,
  ];
  if (broken.length > 0) {
    const first = broken[0]!;
    throw new BadRequestError('invalid_template', `${first.property}: ${first.message}`, { details: broken });
  }
}

/**
 * The templates sent, rendered once with a submission of no values, in the render thread and
 * before the write's transaction: one that runs past a render's limits even so (a loop over
 * ranges written into it, `{% for i in (1..3000) %}{% for j in (1..3000) %}`) would fail every
 * email it is sent for, so it is refused when it is saved. What depends on the values (a range
 * up to a field's value) can only be stopped when it is sent, where it fails for good.
 */
async function costProblems(formId: number, input: EmailInput, format: 'html' | 'text'): Promise<ErrorDetail[]> {
  const submission = {
    accountId: 0,
    formId,
    emailId: 0,
    kind: 'notification' as const,
    submissionId: 0,
    timestamp: '',
    sealed: false,
    data: [],
  };
  const problems: ErrorDetail[] = [];
  for (const part of ['subject', 'message'] as const) {
    const source = input[part];
    // One that does not parse is refused for that (check).
    if (source === undefined || templateProblem(source) !== undefined) continue;
    try {
      await renderTemplates({
        format,
        subject: part === 'subject' ? source : undefined,
        message: part === 'message' ? source : undefined,
        textVariables: mergeVariables(submission, '', false),
        htmlVariables: mergeVariables(submission, '', true),
      });
    } catch (error) {
      // Other failures are left to sending: values may make the template work (a division by a
      // field's value), and a thread that failed is no fault of the template.
      if (error instanceof TemplateLimitError)
        problems.push({
          property: `body.${part}`,
          message: `runs past the limits of a render even with no values (${error.message}), so it could send no email`,
        });
    }
  }
  return problems;
}

/** Each address once, the first spelling kept: mailboxes are matched without regard to case, so a second would get the same mail twice. */
const firstOfEach = (addresses: string[]): string[] => {
  const seen = new Set<string>();
  return addresses.filter((address) => {
    const key = address.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
};

function columns(input: EmailInput): Partial<repo.EmailColumns> {
  const out: Partial<repo.EmailColumns> = {};
  if (input.name !== undefined) out.name = input.name;
  if (input.senderName !== undefined) out.sender_name = input.senderName;
  if (input.replyTo !== undefined) out.reply_to = input.replyTo;
  if (input.subject !== undefined) out.subject = input.subject;
  if (input.message !== undefined) out.message = input.message;
  if (input.format !== undefined) out.format = input.format;
  if (input.logic !== undefined) out.logic = input.logic === null ? null : JSON.stringify(input.logic);
  if (input.attachFiles !== undefined) out.attach_files = Number(input.attachFiles);
  if (input.recipientField !== undefined) out.recipient_field_id = input.recipientField;
  if (input.recipients !== undefined) out.recipients = JSON.stringify(firstOfEach(input.recipients));
  if (input.replyToField !== undefined) out.reply_to_field_id = input.replyToField;
  return out;
}

export async function listEmails<K extends EmailKind>(
  ctx: AppContext,
  scope: AccountScope,
  { formId }: FormRef,
  kind: K,
): Promise<Page & { items: EmailRecord<K>[] }> {
  await requireForm(ctx.db, scope, { formId });
  const items = (await repo.listEmails(ctx.db, scope.accountId, formId, kind)).map((r) => present(kind, r));
  return { items, ...page(items.length, 1, MAX_EMAILS_PER_FORM) };
}

export async function getEmail<K extends EmailKind>(
  ctx: AppContext,
  accountId: number,
  kind: K,
  id: number,
): Promise<EmailRecord<K>> {
  return present(kind, await requireEmail(ctx.db, accountId, kind, id));
}

export async function createEmail<K extends EmailKind>(
  ctx: AppContext,
  scope: AccountScope,
  { formId }: FormRef,
  kind: K,
  input: EmailInput & { subject: string; message: string },
): Promise<EmailRecord<K>> {
  const { accountId } = scope;
  const tooCostly = await costProblems(formId, input, input.format ?? 'html');
  return transact(ctx.db, async (trx) => {
    await requireForm(trx, scope, { formId });
    // The form's row locked first, so that emails made at once are counted one after the other (PostgreSQL).
    await lockForm(trx, accountId, formId);
    if ((await repo.countEmails(trx, accountId, formId, kind)) >= MAX_EMAILS_PER_FORM)
      throw new BadRequestError('too_many_emails', `A form holds at most ${MAX_EMAILS_PER_FORM} ${kind} emails`);
    check(input, await listFields(trx, accountId, formId), tooCostly);
    const now = ctx.clock.now();
    const row = await repo.insertEmail(trx, {
      account_id: accountId,
      form_id: formId,
      kind,
      name: kind === 'confirmation' ? 'Confirmation' : 'Notification',
      sender_name: '',
      reply_to: null,
      reply_to_field_id: null,
      recipient_field_id: null,
      recipients: '[]',
      subject: input.subject,
      message: input.message,
      format: 'html',
      logic: null,
      attach_files: 0,
      ...columns(input),
      created_at: now,
      updated_at: now,
    });
    await reviseForm(trx, accountId, formId);
    return present(kind, row);
  });
}

export async function updateEmail<K extends EmailKind>(
  ctx: AppContext,
  accountId: number,
  kind: K,
  id: number,
  input: EmailInput,
): Promise<EmailRecord<K>> {
  let tooCostly: ErrorDetail[] = [];
  if (input.subject !== undefined || input.message !== undefined) {
    // Read again in the transaction, which answers for the email's access: this read only
    // tells the render which format it is for.
    const before = await repo.findEmail(ctx.db, accountId, kind, id);
    if (before) tooCostly = await costProblems(before.form_id, input, input.format ?? before.format);
  }
  return transact(ctx.db, async (trx) => {
    const current = await requireEmail(trx, accountId, kind, id);
    check(input, await listFields(trx, accountId, current.form_id), tooCostly);
    const row = await repo.updateEmail(trx, accountId, id, { ...columns(input), updated_at: ctx.clock.now() });
    if (!row) throw new NotFoundError(NOT_FOUND[kind]);
    await reviseForm(trx, accountId, current.form_id);
    return present(kind, row);
  });
}

export async function deleteEmail(
  ctx: AppContext,
  accountId: number,
  kind: EmailKind,
  id: number,
): Promise<EmailPreview> {
  return transact(ctx.db, async (trx) => {
    const row = await requireEmail(trx, accountId, kind, id);
    await repo.deleteEmail(trx, accountId, id);
    await reviseForm(trx, accountId, row.form_id);
    return { id: row.id, formId: row.form_id, name: row.name };
  });
}

function toMessage(row: MailLogRow): MailMessage {
  return {
    id: row.id,
    formId: row.form_id,
    emailId: row.email_id,
    submissionId: row.submission_id,
    partialSubmissionId: row.partial_submission_id,
    portalId: row.portal_id,
    kind: row.kind,
    from: row.sender,
    to: JSON.parse(row.recipients) as string[],
    replyTo: row.reply_to,
    subject: row.subject,
    text: row.text_body,
    html: row.html_body,
    attachments: JSON.parse(row.attachments) as MailMessage['attachments'],
    created: isoTime(row.created_at),
  };
}

export async function listMail(
  ctx: AppContext,
  accountId: number,
  q: MailListQuery,
): Promise<Page & { messages: MailMessage[] }> {
  const { rows, total } = await repo.listMail(ctx.db, accountId, (q.pageNumber - 1) * q.pageSize, q.pageSize);
  return { messages: rows.map(toMessage), ...page(total, q.pageNumber, q.pageSize) };
}

export async function getMail(ctx: AppContext, accountId: number, id: number): Promise<MailMessage> {
  const row = await repo.findMail(ctx.db, accountId, id);
  if (!row) throw new NotFoundError('mail_not_found');
  return toMessage(row);
}
