import { randomBytes } from 'node:crypto';
import { SealError, type FormKeys } from '../../crypto/envelope.js';
import type { AppContext } from '../../context.js';
import type { FormRow, PartialSubmissionRow } from '../../db/schema.js';
import type { Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { AppError, BadRequestError, NotFoundError } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { toDefinition } from '../fields/definition.js';
import type { AccountScope, FormRef } from '../permissions/caller.js';
import * as fieldsRepo from '../fields/repository.js';
import * as formsRepo from '../forms/repository.js';
import { publishPartialEvent } from '../events/publish.js';
import { sealingKeyOf } from '../encryption/keys.js';
import { derived, matches } from '../submissions/indexing.js';
import { resolveFilter } from '../submissions/query.js';
import type { SubmissionListQuery } from '../submissions/schemas.js';
import { showsData as showsDataOf } from '../submissions/presentation.js';
import { displayValue, readValue, ValueError, type FieldForValues, type StoredValue } from '../submissions/values.js';
import * as repo from './repository.js';
import type { PartialListItem, PartialSubmission } from './schemas.js';
import { isSealedPartial, openForOwner, openForResume, resumeHash, sealForOwner, sealForResume } from './sealing.js';

/**
 * Partial submissions: what a person filled in on a hosted form and saved to finish later.
 * They hold the values that passed their field's checks (required fields and files wait
 * for the real submission), expire PARTIAL_RETENTION_DAYS after their last save, and go
 * when the submission they turn into is made.
 */

type Values = Map<number, StoredValue>;

export interface PartialMeta {
  userAgent: string;
  remoteAddr: string;
}

const DAY_MS = 86_400_000;

/** The values among inputs that their fields accept; the others (and files) are left out of a partial. */
export function acceptedValues(
  fields: FieldForValues[],
  inputs: { id: number; value: unknown }[],
  now: number,
): Values {
  const byId = new Map(fields.map((f) => [f.id, f]));
  const values: Values = new Map();
  for (const input of inputs) {
    const field = byId.get(input.id);
    if (!field || field.type === 'file' || field.type === 'signature') continue;
    try {
      const value = readValue(field, input.value, now);
      if (value !== null) values.set(field.id, value);
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
    }
  }
  return values;
}

/** The pretty name a submission of these values would have (indexing.ts). */
export const prettyNameOf = (formId: number, fields: FieldForValues[], values: Values): string | null =>
  derived({ formId, fields }, values).prettyName;

const toJson = (values: Values) => JSON.stringify(Object.fromEntries(values));
export const fromJson = (json: string): Values =>
  new Map(Object.entries(JSON.parse(json) as Record<string, StoredValue>).map(([k, v]) => [Number(k), v]));

/**
 * Saves a partial: a new one, or the one that resumeToken names, and publishes partial.saved
 * in the same transaction. Returns the resume token, which the person keeps (the service
 * keeps its hash).
 */
export async function savePartial(
  ctx: AppContext,
  trx: Transaction<Database>,
  form: FormRow,
  fields: FieldForValues[],
  values: Values,
  resumeToken: string | undefined,
  meta: PartialMeta,
): Promise<{ id: number; resumeToken: string }> {
  const now = ctx.clock.now();
  const expiresAt = now + ctx.config.hosted.partialRetentionDays * DAY_MS;
  // The form as it is now, not as the page read it: a save that lands after a conversion has
  // passed its row is not stored the old way (encryption/convert.ts).
  const key = sealingKeyOf((await repo.encryptionNow(trx, form.id)) ?? form);
  const json = toJson(values);
  const plain = key === undefined;
  const existing = resumeToken ? await repo.findByResumeHash(trx, form.id, resumeHash(resumeToken), now) : undefined;
  // A public page's save with nothing in it would make a row and a resume link for nothing, as
  // often as the per-client limit lets it; one that empties a partial already kept is a save.
  if (!existing && values.size === 0) throw new BadRequestError('nothing_to_save');
  const token = existing ? resumeToken! : randomBytes(24).toString('base64url');
  const write = {
    data: plain ? json : '',
    prettyName: plain ? prettyNameOf(form.id, fields, values) : null,
    ...meta,
    now,
    expiresAt,
  };
  const id = existing
    ? // A clear save drops the resume copy an earlier sealed save left, which the clear values replace.
      (await repo.updatePartial(trx, existing.id, { ...write, ...(plain && { resumeData: null }) }), existing.id)
    : (
        await repo.insertPartial(trx, {
          ...write,
          accountId: form.account_id,
          formId: form.id,
          resumeHash: resumeHash(token),
        })
      ).id;
  if (!plain)
    await repo.updatePartial(trx, id, {
      data: sealForOwner(form, key, json, id),
      resumeData: sealForResume(token, json, id),
    });
  await publishPartialEvent(trx, {
    type: 'partial.saved',
    accountId: form.account_id,
    formId: form.id,
    partialSubmissionId: id,
    occurredAt: now,
    sealed: !plain,
    partial: {
      id,
      formId: form.id,
      timestamp: isoTime(existing ? existing.created_at : now),
      updated: isoTime(now),
      expires: isoTime(expiresAt),
      userAgent: meta.userAgent,
      remoteAddr: meta.remoteAddr,
      prettyName: write.prettyName,
      data: plain ? entries(fields, values) : [],
    },
  });
  return { id, resumeToken: token };
}

/** The partial that a resume token names, with its values; undefined when unknown or expired. */
export async function resumePartial(
  ctx: AppContext,
  form: FormRow,
  resumeToken: string,
): Promise<{ id: number; values: Values } | undefined> {
  const row = await repo.findByResumeHash(ctx.db, form.id, resumeHash(resumeToken), ctx.clock.now());
  if (!row) return undefined;
  if (!isSealedPartial(row.data)) return { id: row.id, values: fromJson(row.data) };
  if (row.resume_data === null) return undefined;
  try {
    return { id: row.id, values: fromJson(openForResume(resumeToken, row.resume_data, row.id)) };
  } catch {
    return undefined;
  }
}

/** Removes the partial that a resume token names (its submission was made, in the same transaction). */
export async function finishPartial(
  ctx: AppContext,
  trx: Executor,
  formId: number,
  resumeToken: string,
): Promise<void> {
  const row = await repo.findByResumeHash(trx, formId, resumeHash(resumeToken), ctx.clock.now());
  if (row) await repo.deletePartial(trx, row.id);
}

// The API of spec 4.6.

async function formOf(ctx: AppContext, accountId: number, formId: number) {
  const [form, rows] = await Promise.all([
    formsRepo.findForm(ctx.db, accountId, formId),
    fieldsRepo.listFields(ctx.db, accountId, formId),
  ]);
  if (!form) throw new NotFoundError('form_not_found');
  return { form, fields: rows.map((r) => ({ id: r.id, ...toDefinition(r) })) };
}

async function keysOf(ctx: AppContext, form: FormRow, password: string | undefined): Promise<FormKeys | undefined> {
  return form.encryption_key === null ? undefined : ctx.formKeys.unlock(form, password);
}

/**
 * A row's values, or undefined when they cannot be opened (sealed to a key the form no longer
 * holds, or altered): a list shows such a partial without them rather than failing whole.
 */
function valuesIfOpen(form: FormRow, row: PartialSubmissionRow, keys: FormKeys | undefined): Values | undefined {
  try {
    return valuesOf(form, row, keys);
  } catch (error) {
    if (
      error instanceof AppError &&
      (error.code === 'submission_sealed' || error.code === 'submission_integrity_failed')
    )
      return undefined;
    throw error;
  }
}

function valuesOf(form: FormRow, row: PartialSubmissionRow, keys: FormKeys | undefined): Values {
  if (!isSealedPartial(row.data)) return fromJson(row.data);
  if (!keys) throw new AppError('submission_sealed');
  try {
    return fromJson(openForOwner(form, keys, row.data, row.id));
  } catch (error) {
    if (!(error instanceof SealError)) throw error;
    throw new AppError('submission_integrity_failed', undefined, { cause: error });
  }
}

function entries(fields: FieldForValues[], values: Values) {
  return fields
    .filter((f) => values.has(f.id))
    .map((f) => {
      const value = values.get(f.id)!;
      return {
        field: f.id,
        label: f.label,
        type: f.type,
        value,
        displayValue: displayValue(f, value),
        parsedValue: value,
      };
    });
}

function base(row: PartialSubmissionRow) {
  return {
    id: row.id,
    formId: row.form_id,
    timestamp: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
    expires: isoTime(row.expires_at),
    userAgent: row.user_agent,
    remoteAddr: row.remote_addr,
  };
}

export interface PartialRef {
  partialSubmissionId: number;
}

export async function getPartial(
  ctx: AppContext,
  { accountId }: AccountScope,
  { partialSubmissionId: id }: PartialRef,
  password: string | undefined,
): Promise<PartialSubmission> {
  const row = await repo.findPartial(ctx.db, accountId, id, ctx.clock.now());
  if (!row) throw new NotFoundError('partial_submission_not_found');
  const { form, fields } = await formOf(ctx, accountId, row.form_id);
  const values = valuesOf(form, row, await keysOf(ctx, form, password));
  return { ...base(row), prettyName: prettyNameOf(row.form_id, fields, values), data: entries(fields, values) };
}

export async function deletePartial(
  ctx: AppContext,
  { accountId }: AccountScope,
  { partialSubmissionId: id }: PartialRef,
): Promise<{ id: number }> {
  return transact(ctx.db, async (trx) => {
    const row = await repo.findPartial(trx, accountId, id, ctx.clock.now());
    if (!row) throw new NotFoundError('partial_submission_not_found');
    await repo.deletePartial(trx, id);
    return { id };
  });
}

/**
 * GET /form/{formId}/partialsubmission: the submission list's parameters and meanings. The
 * filters that look at values run on the form's live partials here (partials are few and
 * short-lived, so they have no index); on an encrypted form they need the password.
 */
export async function listPartials(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId }: FormRef,
  q: SubmissionListQuery,
  password: string | undefined,
): Promise<Page & { partialSubmissions: PartialListItem[] }> {
  const { form, fields } = await formOf(ctx, accountId, formId);
  // The submission list's filters, checked and read the same way.
  const { from, to, terms, impossible } = resolveFilter({ byId: new Map(fields.map((f) => [f.id, f])) }, q);
  const showsData = showsDataOf(q);
  const sealed = form.encryption_key !== null;
  const keys = showsData || q.prettyName || terms.length > 0 ? await keysOf(ctx, form, password) : undefined;

  let rows = impossible
    ? []
    : await repo.listPartials(ctx.db, accountId, formId, {
        from,
        to,
        order: q.order.toLowerCase() as 'asc' | 'desc',
        now: ctx.clock.now(),
      });
  const opened = new Map<number, Values | undefined>();
  const open = (row: PartialSubmissionRow) => {
    if (!opened.has(row.id)) opened.set(row.id, valuesIfOpen(form, row, keys));
    return opened.get(row.id);
  };
  // Filtered by the tokens a submission's index would hold for the values (indexing.ts); values
  // that do not open match nothing.
  if (terms.length > 0)
    rows = rows.filter((row) => {
      const values = open(row);
      return values !== undefined && matches(derived({ formId, fields }, values).tokens, terms);
    });
  const total = rows.length;
  const slice = rows.slice((q.pageNumber - 1) * q.pageSize, q.pageNumber * q.pageSize);
  const items = slice.map((row) => {
    const item: PartialListItem = base(row);
    // A partial whose values do not open is listed without data, its name null.
    const namedByValues = sealed || isSealedPartial(row.data);
    const values = showsData || (q.prettyName && namedByValues) ? open(row) : undefined;
    if (q.prettyName)
      item.prettyName = !namedByValues ? row.pretty_name : values ? prettyNameOf(formId, fields, values) : null;
    if (showsData && values) {
      const list = entries(fields, values);
      item.data =
        q.dataFormat === 'standardized'
          ? list
          : Object.fromEntries(
              list.map((e) => [String(e.field), q.expandData ? e : { field: e.field, value: e.value }]),
            );
    }
    return item;
  });
  return { partialSubmissions: items, ...page(total, q.pageNumber, q.pageSize) };
}

/** The retention chore: partials past their expiry, in batches. */
export async function removeExpiredPartials(ctx: Pick<AppContext, 'db' | 'clock'>): Promise<number> {
  let removed = 0;
  for (;;) {
    const n = await transact(ctx.db, (trx) => repo.deleteExpiredPartials(trx, ctx.clock.now(), 500));
    removed += n;
    if (n < 500) return removed;
  }
}
