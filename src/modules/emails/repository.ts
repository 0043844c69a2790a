import type { FormEmailRow, FormRow, MailLogRow, NewFormEmailRow } from '../../db/schema.js';
import { deleteInSlices, type Executor } from '../../db/transaction.js';
import { prepared } from '../../db/hot-query.js';
import type { EmailKind } from './schemas.js';
import { LIQUID_PART } from './template.js';

export type EmailColumns = Omit<NewFormEmailRow, 'id' | 'account_id' | 'form_id' | 'kind' | 'created_at'>;

export async function listEmails(
  db: Executor,
  accountId: number,
  formId: number,
  kind: EmailKind,
): Promise<FormEmailRow[]> {
  return db
    .selectFrom('form_emails')
    .selectAll()
    .where('form_id', '=', formId)
    .where('kind', '=', kind)
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
}

export type EmailToJudge = Pick<FormEmailRow, 'id' | 'kind' | 'logic' | 'recipient_field_id'>;

/** What a new submission needs to decide which emails it sends: one query on the form's index. */
export async function emailsToJudge(db: Executor, accountId: number, formId: number): Promise<EmailToJudge[]> {
  return db
    .selectFrom('form_emails')
    .select(['id', 'kind', 'logic', 'recipient_field_id'])
    .where('form_id', '=', formId)
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
}

export async function findEmail(
  db: Executor,
  accountId: number,
  kind: EmailKind,
  id: number,
): Promise<FormEmailRow | undefined> {
  return db
    .selectFrom('form_emails')
    .selectAll()
    .where('id', '=', id)
    .where('kind', '=', kind)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}

/** The columns of a form email that sending it reads (send.ts, compose.ts). */
const SEND_COLUMNS = [
  'kind',
  'sender_name',
  'reply_to',
  'reply_to_field_id',
  'recipient_field_id',
  'recipients',
  'subject',
  'message',
  'format',
  'attach_files',
] as const;

export type EmailToSend = Pick<FormEmailRow, (typeof SEND_COLUMNS)[number]> & {
  form_name: string | null;
  /** When the form was deleted (deleted forms send nothing), or null. */
  form_deleted_at: number | null;
  /** The form's encryption as it is now (a job may hold values from before it was encrypted). */
  is_encrypted: number | null;
  encryption_state: FormRow['encryption_state'];
};

/**
 * A form email as its job sends it, with what it reads of its form (its name, whether it is
 * deleted or encrypted now; null if the form is gone), in one statement that names its
 * columns, so that it is prepared (hot-query.ts): once an email, where a look-up of the email
 * and one of the form were two round trips.
 */
export async function emailToSend(
  db: Executor,
  accountId: number,
  kind: EmailKind,
  id: number,
): Promise<EmailToSend | undefined> {
  const query = db
    .selectFrom('form_emails')
    .leftJoin('forms', (join) =>
      join.onRef('forms.id', '=', 'form_emails.form_id').onRef('forms.account_id', '=', 'form_emails.account_id'),
    )
    .select(SEND_COLUMNS.map((c) => `form_emails.${c}` as const))
    .select([
      'forms.name as form_name',
      'forms.deleted_at as form_deleted_at',
      'forms.is_encrypted',
      'forms.encryption_state',
    ])
    .where('form_emails.id', '=', id)
    .where('form_emails.kind', '=', kind)
    .where('form_emails.account_id', '=', accountId);
  return (await db.executeQuery(prepared(query))).rows[0];
}

export async function countEmails(db: Executor, accountId: number, formId: number, kind: EmailKind): Promise<number> {
  const row = await db
    .selectFrom('form_emails')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('form_id', '=', formId)
    .where('kind', '=', kind)
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function insertEmail(db: Executor, row: NewFormEmailRow): Promise<FormEmailRow> {
  return db.insertInto('form_emails').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateEmail(
  db: Executor,
  accountId: number,
  id: number,
  columns: Partial<EmailColumns>,
): Promise<FormEmailRow | undefined> {
  return db
    .updateTable('form_emails')
    .set(columns)
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteEmail(db: Executor, accountId: number, id: number): Promise<void> {
  await db.deleteFrom('form_emails').where('id', '=', id).where('account_id', '=', accountId).execute();
}

/**
 * Copies every email of one form of the account to another (for a form copy with
 * includeEmails), pointing field ids (recipient, reply-to, logic checks) at the copied
 * fields: fieldIds maps each original field id to its copy's. Returns the new rows.
 */
export async function copyEmails(
  db: Executor,
  accountId: number,
  fromFormId: number,
  toFormId: number,
  fieldIds: ReadonlyMap<number, number>,
  now: number,
): Promise<FormEmailRow[]> {
  const rows = await db
    .selectFrom('form_emails')
    .selectAll()
    .where('form_id', '=', fromFormId)
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
  const remap = (id: number | null) => (id === null ? null : (fieldIds.get(id) ?? id));
  const tags = (template: string) => withFieldTagsRemapped(template, fieldIds);
  const copies: FormEmailRow[] = [];
  for (const { id: _id, ...row } of rows) {
    const logic = row.logic === null ? null : (JSON.parse(row.logic) as { checks: { field: number }[] });
    if (logic) logic.checks = logic.checks.map((c) => ({ ...c, field: remap(c.field)! }));
    copies.push(
      await insertEmail(db, {
        ...row,
        form_id: toFormId,
        subject: tags(row.subject),
        message: tags(row.message),
        recipient_field_id: remap(row.recipient_field_id),
        reply_to_field_id: remap(row.reply_to_field_id),
        logic: logic === null ? null : JSON.stringify(logic),
        created_at: now,
        updated_at: now,
      }),
    );
  }
  return copies;
}

/**
 * Turning a form's encryption on: the mail log's messages of its emails (confirmations,
 * notifications, documents) keep who they went to and when, and lose what the submissions put
 * in them: subject, bodies, recipients and reply-to (a confirmation goes to the person who
 * submitted), attachment names. The owner and admins read the log without the form's password.
 */
export async function withholdFormMessages(db: Executor, formId: number, note: string): Promise<void> {
  await db
    .updateTable('mail_log')
    .set({
      subject: '(withheld: the form is encrypted)',
      text_body: note,
      html_body: null,
      recipients: '[]',
      reply_to: null,
      attachments: '[]',
    })
    .where('form_id', '=', formId)
    .where('kind', 'in', ['confirmation', 'notification', 'document'])
    .execute();
}

/** A merge tag by field id (field_12, fields["12"]): only inside a Liquid part (LIQUID_PART) does it name a field. */
const BY_ID = /\bfield_(\d+)\b|(\bfields\s*\[\s*)(["'])(\d+)\3(\s*\])/g;

/**
 * A template of a copied form's email with its merge tags that name fields by id (docs/emails.md:
 * `field_12`, `fields["12"]`) pointed at the copies of those fields, as its recipient field and
 * logic are: left as they were, they named the source form's fields and merged empty. Tags by
 * label need nothing.
 */
export function withFieldTagsRemapped(template: string, fieldIds: ReadonlyMap<number, number>): string {
  const to = (id: string) => String(fieldIds.get(Number(id)) ?? id);
  return template.replace(LIQUID_PART, (part) =>
    part.replace(BY_ID, (_whole, plain?: string, open?: string, quote?: string, quoted?: string, close?: string) =>
      plain !== undefined ? `field_${to(plain)}` : `${open}${quote}${to(quoted!)}${quote}${close}`,
    ),
  );
}

/** The form's name, deleted or not: a submission made before a form was deleted still sends its emails. */
export async function formName(db: Executor, accountId: number, formId: number): Promise<string | undefined> {
  // Once a resume link: prepared (hot-query.ts).
  const query = db.selectFrom('forms').select('name').where('id', '=', formId).where('account_id', '=', accountId);
  return (await db.executeQuery(prepared(query))).rows[0]?.name;
}

/** Where the stored files of a submission are, by their fileKeys; files no longer held are left out. */
export async function storedFiles(
  db: Executor,
  accountId: number,
  submissionId: number,
  fileKeys: string[],
): Promise<{ file_key: string; storage_key: string; size: number | null; sealed: number }[]> {
  if (fileKeys.length === 0) return [];
  return db
    .selectFrom('uploads')
    .select(['file_key', 'storage_key', 'size', 'sealed'])
    .where('file_key', 'in', fileKeys)
    .where('account_id', '=', accountId)
    .where('submission_id', '=', submissionId)
    .where('state', '=', 'claimed')
    .execute();
}

export type NewMailLogRow = Omit<MailLogRow, 'id' | 'partial_submission_id' | 'portal_id'> & {
  partial_submission_id?: number | null;
  portal_id?: number | null;
};

/** Keeps one message; a job that runs again finds its message there and writes nothing. */
export async function insertMail(db: Executor, row: NewMailLogRow): Promise<void> {
  await db.executeQuery(
    prepared(
      db
        .insertInto('mail_log')
        .values(row)
        .onConflict((oc) => oc.column('job_id').doNothing()),
    ),
  );
}

/**
 * Deletes the messages of the mail log written before `before` (epoch ms), every account's,
 * a thousand at a time so that no statement holds the log for long; returns how many.
 */
export function deleteMailBefore(db: Executor, before: number): Promise<number> {
  return deleteInSlices((limit) =>
    db
      .deleteFrom('mail_log')
      .where('id', 'in', (eb) =>
        eb.selectFrom('mail_log as old').select('old.id').where('old.created_at', '<', before).limit(limit),
      )
      .executeTakeFirst(),
  );
}

export async function listMail(
  db: Executor,
  accountId: number,
  offset: number,
  limit: number,
): Promise<{ rows: MailLogRow[]; total: number }> {
  const total = await db
    .selectFrom('mail_log')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  const rows = await db
    .selectFrom('mail_log')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('id', 'desc')
    .offset(offset)
    .limit(limit)
    .execute();
  return { rows, total: Number(total.n) };
}

export async function findMail(db: Executor, accountId: number, id: number): Promise<MailLogRow | undefined> {
  return db
    .selectFrom('mail_log')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}
