import { setPermission } from '../permissions/repository.js';
import type { AppContext } from '../../context.js';
import { requireFormLevel } from '../../http/access.js';
import { newKey } from '../../crypto/secrets.js';
import type { FormRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { ConflictError, invalid, NotFoundError } from '../../errors.js';
import { enqueue } from '../../jobs/outbox.js';
import { encryptionOfNewForm, planEncryptionChange } from '../encryption/service.js';
import { conversionJob } from '../encryption/convert.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { VersionedCache } from '../../http/versioned-cache.js';
import { changeEpoch } from '../../db/change-epoch.js';
import {
  appendedOrder,
  checkDefinition,
  toDefinition,
  toField,
  toFieldRow,
  withDefaults,
} from '../fields/definition.js';
import { withSmartListOptions } from '../fields/smart-list.js';
import * as fieldsRepo from '../fields/repository.js';
import type { Field } from '../fields/schemas.js';
import { lockFolders, requireFolderId } from '../folders/service.js';
import * as repo from './repository.js';
import {
  settingsOf,
  type CopyQuery,
  type Form,
  type FormCreate,
  type FormListQuery,
  type FormUpdate,
} from './schemas.js';
import * as emailsRepo from '../emails/repository.js';
import { copyWebhooks } from '../webhooks/copy.js';
import { copyIntegrations } from '../docmerge/copy.js';
import { memberOf, type AccountScope, type Caller, type FormRef } from '../permissions/caller.js';
import { countOptionsByList, optionsOfLists } from '../smartlists/repository.js';
import { checkFormTotal, lockOptionTotals, tooManyOptions } from '../smartlists/form-options.js';
import { MAX_OPTIONS_PER_FORM } from '../smartlists/schemas.js';
import { defaultTheme, themeForForm } from '../themes/service.js';
import { cutToCharacters } from '../../http/characters.js';

const DEFAULT_SUBMIT_TITLE = 'Submit';

/**
 * A redirect that a browser can follow. The schema's uri format takes some URLs that the
 * browsers' parser refuses (a port past 65535, a host such as 256.1.1.1 or xn--), and the
 * hosted page names the redirect's origin in its policy (form-action): such a URL would make
 * every view of the page fail rather than only its redirect.
 */
function checkRedirectUrl(settings: { redirectUrl?: string } | undefined): void {
  const url = settings?.redirectUrl;
  if (url !== undefined && !URL.canParse(url))
    throw invalid('validation_failed', 'body.settings.redirectUrl', 'is not a URL that a browser can open');
}

export function toForm(ctx: AppContext, row: FormRow, fields?: Field[]): Form {
  const form: Form = {
    id: row.id,
    name: row.name,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
    folder: row.folder_id,
    url: `${ctx.config.publicUrl}/f/${row.view_key}`,
    viewKey: row.view_key,
    isEncrypted: row.is_encrypted === 1,
    encryptionState: row.encryption_state,
    inactive: row.inactive === 1,
    submissionsCount: row.submissions_count,
    submitButtonTitle: row.submit_button_title,
    themeId: row.theme_id,
    settings: settingsOf(row),
  };
  if (row.deleted_at !== null) form.deleted = isoTime(row.deleted_at);
  if (fields) form.fields = fields;
  return form;
}

/** A live form of the account, or 404: the one gate for every form-scoped route. */
export async function requireForm(db: Executor, { accountId }: AccountScope, { formId }: FormRef): Promise<FormRow> {
  const form = await repo.findForm(db, accountId, formId);
  if (!form) throw new NotFoundError('form_not_found');
  return form;
}

/**
 * The version a form's serialized record is kept under: every change the record shows moves
 * the revision or the submission counters, and submissions_version only goes up (the count
 * alone can come back to an earlier value).
 */
export function formVersion(row: { revision: number; submissions_count: number; submissions_version: number }): string {
  return `${row.revision}.${row.submissions_version}.${row.submissions_count}`;
}

/** The cache key of a form's record without fields, shared by the form read and the list. */
const recordKey = (formId: number, withFields: boolean) => `${formId}:${withFields ? 'f' : ''}`;

export interface ListSerializers {
  form: (form: Form) => string;
  page: (body: Page & { forms: Form[] }) => string;
}

/**
 * What the form read and the list keep per process: records as bytes under the version of
 * the form they were built from (checked with one indexed read per request), and whole
 * answers under the database's change epoch (src/db/change-epoch.ts), served with no
 * statement at all while nothing has been written since they were made (SQLite only).
 */
export interface FormReadCaches {
  records: VersionedCache<Buffer>;
  answers: VersionedCache<{ etag: string; body: Buffer }>;
}

export function formReadCaches(bytes: number): FormReadCaches {
  return {
    records: new VersionedCache<Buffer>(bytes, (body) => body.length),
    // Its bodies are mostly the records' own buffers (the form read) or pages made of them.
    answers: new VersionedCache<{ etag: string; body: Buffer }>(bytes, (a) => 64 + a.body.length),
  };
}

/**
 * A page of the account's forms as JSON. On SQLite the whole page is kept under the change
 * epoch and served again while nothing has been written. Otherwise the page itself (ids,
 * versions, total) is read; each form's record comes from the cache when its version still
 * matches, and the rest in one read. So no process serves a stale record, and a page costs a
 * narrow read rather than materializing and serializing every column of every form.
 */
export async function listFormsJson(
  ctx: AppContext,
  caches: FormReadCaches,
  caller: Caller,
  q: FormListQuery,
  serialize: ListSerializers,
): Promise<Buffer> {
  const epoch = changeEpoch(ctx.db);
  const visibleTo = memberOf(caller);
  // Everything the page depends on: the account, the member's permissions, the query.
  const key = JSON.stringify([
    'list',
    caller.accountId,
    visibleTo ?? null,
    q.search ?? null,
    q.folder ?? null,
    q.deleted,
    q.orderBy,
    q.order,
    q.pageSize,
    q.pageNumber,
  ]);
  const kept = epoch === undefined ? undefined : caches.answers.get(key, epoch);
  if (kept) return kept.body;
  const body = await buildListJson(ctx, caches.records, caller, visibleTo, q, serialize);
  if (epoch !== undefined) caches.answers.set(key, epoch, { etag: '', body });
  return body;
}

/** What a listing is ordered by: as asked, else by id, or for deleted forms by deletion, newest first. */
function listOrder(q: FormListQuery): { orderBy: repo.FormListFilter['orderBy']; order: 'asc' | 'desc' } {
  const byDeletion = q.deleted && q.orderBy === undefined;
  return {
    orderBy: q.orderBy ?? (byDeletion ? 'deleted' : 'id'),
    order: (q.order?.toLowerCase() as 'asc' | 'desc' | undefined) ?? (byDeletion ? 'desc' : 'asc'),
  };
}

async function buildListJson(
  ctx: AppContext,
  cache: VersionedCache<Buffer>,
  { accountId }: Caller,
  visibleTo: number | undefined,
  q: FormListQuery,
  serialize: ListSerializers,
): Promise<Buffer> {
  if (q.folder !== undefined) await requireFolderId(ctx.db, { accountId }, q.folder);
  const { rows, total } = await repo.listFormVersions(ctx.db, accountId, {
    search: q.search,
    folderId: q.folder,
    deleted: q.deleted,
    visibleTo,
    ...listOrder(q),
    limit: q.pageSize,
    offset: (q.pageNumber - 1) * q.pageSize,
  });
  const records = rows.map((r) => cache.get(recordKey(r.id, false), formVersion(r)));
  const missing = rows.filter((_, i) => records[i] === undefined).map((r) => r.id);
  if (missing.length > 0) {
    const found = new Map((await repo.findFormsByIds(ctx.db, accountId, missing)).map((r) => [r.id, r]));
    for (const [i, r] of rows.entries()) {
      const row = records[i] === undefined ? found.get(r.id) : undefined;
      if (!row) continue;
      // Kept under the version of the row it was built from, which may be newer than the page's.
      const record = Buffer.from(serialize.form(toForm(ctx, row)));
      cache.set(recordKey(row.id, false), formVersion(row), record);
      records[i] = record;
    }
  }
  // Forms are only ever soft-deleted; one gone between the two reads (its account deleted) is left out.
  const items = records.filter((r) => r !== undefined);
  const envelope = serialize.page({ forms: [], ...page(total, q.pageNumber, q.pageSize) });
  const empty = envelope.indexOf('"forms":[]');
  if (empty < 0) throw new Error('the list serializer no longer writes "forms":[] for an empty page');
  const at = empty + '"forms":['.length;
  const parts: Buffer[] = [Buffer.from(envelope.slice(0, at))];
  for (const [i, item] of items.entries()) {
    if (i > 0) parts.push(COMMA);
    parts.push(item);
  }
  parts.push(Buffer.from(envelope.slice(at)));
  return Buffer.concat(parts);
}

const COMMA = Buffer.from(',');

export async function getForm(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId }: FormRef,
  withFields: boolean,
): Promise<Form> {
  return (await readForm(ctx, { accountId }, { formId }, withFields)).form;
}

async function readForm(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId }: FormRef,
  withFields: boolean,
): Promise<{ form: Form; version: string }> {
  const row = await requireForm(ctx.db, { accountId }, { formId });
  const fields = withFields ? (await fieldsRepo.listFields(ctx.db, accountId, formId)).map(toField) : undefined;
  return { form: toForm(ctx, row, fields), version: formVersion(row) };
}

/**
 * A form read as JSON (UTF-8 bytes) with its entity tag, from the cache when the form has not changed
 * since it was serialized. serialize is the route's own response serializer.
 */
export async function readFormJson(
  ctx: AppContext,
  caches: FormReadCaches,
  { accountId }: AccountScope,
  { formId }: FormRef,
  withFields: boolean,
  serialize: (form: Form) => string,
): Promise<{ etag: string; body: Buffer }> {
  const epoch = changeEpoch(ctx.db);
  const key = formAnswerKey(accountId, formId, withFields);
  const kept = epoch === undefined ? undefined : caches.answers.get(key, epoch);
  if (kept) return kept;
  const answer = await buildFormJson(ctx, caches.records, accountId, formId, withFields, serialize);
  if (epoch !== undefined) caches.answers.set(key, epoch, answer);
  return answer;
}

// The account is part of the key: another account's form is read (and answers 404) as ever.
const formAnswerKey = (accountId: number, formId: number, withFields: boolean) =>
  `form:${accountId}:${formId}:${withFields ? 'f' : ''}`;

/** The answer readFormJson would give, when it is kept and nothing has been written since; else undefined. */
export function keptFormJson(
  ctx: AppContext,
  caches: FormReadCaches,
  accountId: number,
  formId: number,
  withFields: boolean,
): { etag: string; body: Buffer } | undefined {
  const epoch = changeEpoch(ctx.db);
  return epoch === undefined ? undefined : caches.answers.get(formAnswerKey(accountId, formId, withFields), epoch);
}

async function buildFormJson(
  ctx: AppContext,
  cache: VersionedCache<Buffer>,
  accountId: number,
  formId: number,
  withFields: boolean,
  serialize: (form: Form) => string,
): Promise<{ etag: string; body: Buffer }> {
  const found = await repo.findFormVersion(ctx.db, accountId, formId);
  if (found === undefined) throw new NotFoundError('form_not_found');
  const key = recordKey(formId, withFields);
  let version = formVersion({
    revision: found.revision,
    submissions_count: found.submissionsCount,
    submissions_version: found.submissionsVersion,
  });
  let body = cache.get(key, version);
  if (body === undefined) {
    // Kept under the version of the row it was built from (its fields are read after it, and
    // a change to them moves the revision), never under the one read above: a body newer
    // than its version could be served after the counters come back to that version.
    const read = await readForm(ctx, { accountId }, { formId }, withFields);
    // Kept as bytes: the socket takes them as they are, with no encoding per request.
    body = Buffer.from(serialize(read.form));
    version = read.version;
    cache.set(key, version, body);
  }
  return { etag: `"${formId}.${version}${withFields ? '.f' : ''}"`, body };
}

/** A member who makes a form holds the full level on it; owners and admins need no level. */
async function grantCreator(
  trx: Executor,
  accountId: number,
  formId: number,
  member: number | undefined,
  now: number,
): Promise<void> {
  if (member !== undefined) await setPermission(trx, { accountId, userId: member, formId, level: 'full' }, now);
}

export async function createForm(ctx: AppContext, caller: Caller, input: FormCreate): Promise<Form> {
  const { accountId } = caller;
  const member = memberOf(caller);
  checkRedirectUrl(input.settings);
  // Check every field before touching the database, so that a bad field costs no write.
  const definitions = await Promise.all(
    (input.fields ?? []).map(async (f, i) =>
      checkDefinition(
        await withSmartListOptions(ctx.db, accountId, withDefaults(f), `body.fields[${i}]`, f.options),
        `body.fields[${i}]`,
        new Map(),
      ),
    ),
  );
  // As read above, so that a form far over the bound costs no key derivation; counted again below.
  newFormOptions(input.name, definitions, new Map());
  const viewKey = newKey();
  const encryption = await encryptionOfNewForm(ctx, accountId, input, viewKey);
  return transact(ctx.db, async (trx) => {
    if (input.folder != null) await lockFolders(trx, { accountId });
    await requireFolderId(trx, { accountId }, input.folder);
    // The lists' options as they are while the form is written (they may have grown since they were read).
    await lockOptionTotals(trx, accountId);
    newFormOptions(
      input.name,
      definitions,
      await countOptionsByList(trx, [
        ...new Set(definitions.flatMap((d) => (d.smartList === null ? [] : [d.smartList]))),
      ]),
    );
    const now = ctx.clock.now();
    const theme =
      input.themeId === undefined
        ? await defaultTheme(trx, accountId, now)
        : await themeForForm(trx, { accountId }, input.themeId, 'body.themeId');
    const form = await repo.insertForm(trx, {
      account_id: accountId,
      folder_id: input.folder ?? null,
      theme_id: theme.id,
      name: input.name,
      submit_button_title: input.submitButtonTitle ?? DEFAULT_SUBMIT_TITLE,
      settings: JSON.stringify(input.settings ?? {}),
      view_key: viewKey,
      inactive: Number(input.inactive ?? false),
      ...encryption,
      created_at: now,
      updated_at: now,
    });
    await grantCreator(trx, accountId, form.id, member, now);
    const fields: Field[] = [];
    // A field without a displayOrder comes after the fields before it, as one added later would.
    let last = -1;
    for (const def of definitions) {
      const displayOrder = def.displayOrder ?? appendedOrder(last);
      last = Math.max(last, displayOrder);
      const row = await fieldsRepo.insertField(trx, toFieldRow(def, { accountId, formId: form.id, displayOrder }, now));
      fields.push(toField(row));
    }
    fields.sort((a, b) => a.displayOrder - b.displayOrder || a.id - b.id);
    return toForm(ctx, form, fields);
  });
}

/**
 * Refuses a new form whose fields would show more options than a form may: their own, and for
 * each field on a smart list the list's (from lists, when counted; else as the definition read them).
 */
function newFormOptions(
  name: string,
  definitions: { options: unknown[]; smartList: number | null }[],
  lists: Map<number, number>,
): void {
  const total = definitions.reduce(
    (sum, d) => sum + (d.smartList === null ? d.options.length : (lists.get(d.smartList) ?? d.options.length)),
    0,
  );
  if (total > MAX_OPTIONS_PER_FORM)
    throw tooManyOptions(
      'body.fields',
      [{ form: { id: null, name }, total }],
      'These fields would show too many options',
    );
}

export async function updateForm(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId }: FormRef,
  input: FormUpdate,
): Promise<Form> {
  checkRedirectUrl(input.settings);
  // Encryption changes do their slow part (scrypt) before the transaction, which then checks
  // that nobody changed the form's key in between.
  const before = await requireForm(ctx.db, { accountId }, { formId });
  const encryption = await planEncryptionChange(ctx, before, input);
  return transact(ctx.db, async (trx) => {
    // The theme first: a delete of it locks it before its forms, so this locks in the same order.
    if (input.themeId !== undefined) await themeForForm(trx, { accountId }, input.themeId, 'body.themeId');
    // Then the folder tree, which a folder's delete also locks before the forms it moves.
    if (input.folder != null) await lockFolders(trx, { accountId });
    const current = encryption
      ? await repo.lockForm(trx, accountId, formId)
      : await requireForm(trx, { accountId }, { formId });
    if (!current) throw new NotFoundError('form_not_found');
    if (
      encryption &&
      (current.encryption_key !== before.encryption_key || current.encryption_state !== before.encryption_state)
    ) {
      throw new ConflictError('encryption_changed');
    }
    await requireFolderId(trx, { accountId }, input.folder);
    const row = await repo.updateForm(trx, accountId, formId, {
      ...(input.themeId !== undefined && { theme_id: input.themeId }),
      ...(input.name !== undefined && { name: input.name }),
      ...(input.folder !== undefined && { folder_id: input.folder }),
      ...(input.submitButtonTitle !== undefined && { submit_button_title: input.submitButtonTitle }),
      ...(input.inactive !== undefined && { inactive: Number(input.inactive) }),
      ...(input.settings !== undefined && { settings: JSON.stringify(input.settings) }),
      ...encryption?.update,
      updated_at: ctx.clock.now(),
    });
    if (encryption?.conversion) await enqueue(trx, conversionJob, encryption.conversion);
    return toForm(ctx, row);
  });
}

export async function deleteForm(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId }: FormRef,
): Promise<{ id: number; name: string; deleted: string }> {
  return transact(ctx.db, async (trx) => {
    const form = await requireForm(trx, { accountId }, { formId });
    const now = ctx.clock.now();
    await repo.updateForm(trx, accountId, formId, { deleted_at: now });
    return { id: form.id, name: form.name, deleted: isoTime(now) };
  });
}

export async function restoreForm(ctx: AppContext, { accountId }: AccountScope, { formId }: FormRef): Promise<Form> {
  return transact(ctx.db, async (trx) => {
    const form = await repo.findForm(trx, accountId, formId, true);
    if (!form) throw new NotFoundError('deleted_form_not_found');
    // Deleted forms do not hold their lists to the bound: one may have grown past it meanwhile.
    await lockOptionTotals(trx, accountId);
    await checkFormTotal(trx, accountId, form, 'formId', 'The form cannot be restored');
    // The folder may have been deleted since; the form then comes back at the top level.
    const row = await repo.updateForm(trx, accountId, formId, { deleted_at: null, updated_at: ctx.clock.now() });
    return toForm(ctx, row);
  });
}

export async function copyForm(ctx: AppContext, caller: Caller, { formId }: FormRef, q: CopyQuery): Promise<Form> {
  const { accountId } = caller;
  const member = memberOf(caller);
  return transact(ctx.db, async (trx) => {
    // Before the source is read: the copy goes into a folder (the one asked for, or the source's
    // as it is now) that must still be there as the copy is written (see lockFolders).
    await lockFolders(trx, { accountId });
    const source = await requireForm(trx, { accountId }, { formId });
    const look = q.template === undefined ? source : await requireForm(trx, { accountId }, { formId: q.template });
    // The copy shows the template's settings to whoever copies it: a member must be able to read that form too.
    if (q.template !== undefined && member !== undefined)
      await requireFormLevel(trx, accountId, member, q.template, 'view');
    await requireFolderId(trx, { accountId }, q.folder);
    // Webhooks and emails are read and changed at the edit level: copying them asks for it too.
    if ((q.includeIntegrations || q.includeEmails) && member !== undefined)
      await requireFormLevel(trx, accountId, member, formId, 'edit');
    await checkCopy(trx, source);
    const now = ctx.clock.now();
    const { copy, fields, newIds } = await copyFormRows(ctx, trx, source, look, {
      accountId,
      folderId: q.folder ?? source.folder_id,
      themeId: look.theme_id,
      includeIntegrations: q.includeIntegrations,
      now,
    });
    await grantCreator(trx, accountId, copy.id, member, now);
    if (q.includeEmails) await emailsRepo.copyEmails(trx, accountId, formId, copy.id, newIds, now);
    return toForm(ctx, copy, fields);
  });
}

/**
 * A form of the account copied into another account (a subaccount of it): fields, settings and,
 * with includeIntegrations, webhooks; at the top level, on that account's default theme. Fields
 * that take their options from a smart list keep the list's current options as their own (the
 * list stays with its account). The caller checks that the target is the source's subaccount.
 */
export async function copyFormIntoAccount(
  ctx: AppContext,
  trx: Executor,
  { accountId }: AccountScope,
  { formId }: FormRef,
  targetAccountId: number,
  includeIntegrations: boolean,
): Promise<Form> {
  const source = await requireForm(trx, { accountId }, { formId });
  await checkCopy(trx, source);
  const now = ctx.clock.now();
  const theme = await defaultTheme(trx, targetAccountId, now);
  const { copy, fields } = await copyFormRows(ctx, trx, source, source, {
    accountId: targetAccountId,
    folderId: null,
    themeId: theme.id,
    includeIntegrations,
    now,
  });
  return toForm(ctx, copy, fields);
}

/**
 * A copy shows what its source shows (a copy into another account keeps the lists' options as
 * its own): refused when that is more than a form may show, which only a form made before the
 * bound can. The source account's lock keeps its lists as counted until the copy commits.
 */
async function checkCopy(trx: Executor, source: FormRow): Promise<void> {
  await lockOptionTotals(trx, source.account_id);
  await checkFormTotal(
    trx,
    source.account_id,
    source,
    'formId',
    `Form ${source.id} "${source.name}" cannot be copied`,
    { id: null, name: `${source.name} (copy)` },
  );
}

/** The copy's form row, its fields (logic pointed at the copied fields) and, if asked, its webhooks. */
async function copyFormRows(
  ctx: AppContext,
  trx: Executor,
  source: FormRow,
  look: FormRow,
  to: { accountId: number; folderId: number | null; themeId: string | null; includeIntegrations: boolean; now: number },
): Promise<{ copy: FormRow; fields: Field[]; newIds: Map<number, number> }> {
  const { now } = to;
  const across = to.accountId !== source.account_id;
  const copy = await repo.insertForm(trx, {
    account_id: to.accountId,
    folder_id: to.folderId,
    name: cutToCharacters(`${source.name} (copy)`, 200),
    submit_button_title: look.submit_button_title,
    settings: look.settings,
    view_key: newKey(),
    inactive: source.inactive,
    is_encrypted: 0,
    theme_id: to.themeId,
    created_at: now,
    updated_at: now,
  });
  // Copy the fields, then point the copies' logic at the copied fields rather than the originals.
  const originals = await fieldsRepo.listFields(trx, source.account_id, source.id);
  const lists = across
    ? await optionsOfLists(trx, [
        ...new Set(originals.flatMap((f) => (f.smart_list_id === null ? [] : [f.smart_list_id]))),
      ])
    : new Map<number, { label: string; value: string }[]>();
  const newIds = new Map<number, number>();
  const copies = [];
  for (const original of originals) {
    // Another account cannot use this account's smart lists: the copy keeps their options as its own.
    const detached =
      across && original.smart_list_id !== null
        ? { smart_list_id: null, options: JSON.stringify(lists.get(original.smart_list_id) ?? []) }
        : {};
    const row = await fieldsRepo.insertField(trx, {
      ...withoutId(original),
      ...detached,
      account_id: to.accountId,
      form_id: copy.id,
      logic: null,
      created_at: now,
      updated_at: now,
    });
    newIds.set(original.id, row.id);
    copies.push(row);
  }
  const fields: Field[] = [];
  for (const [i, row] of copies.entries()) {
    const logic = toDefinition(originals[i]!).logic;
    if (logic) {
      const remapped = {
        ...logic,
        checks: logic.checks.map((c) => ({ ...c, field: newIds.get(c.field) ?? c.field })),
      };
      row.logic = JSON.stringify(remapped);
      await fieldsRepo.setLogic(trx, to.accountId, row.id, row.logic, now);
    }
    fields.push(toField(row));
  }
  if (to.includeIntegrations) {
    await copyWebhooks(trx, ctx.config.secretKey, source.account_id, source.id, copy.id, now, to.accountId);
    await copyIntegrations(trx, source.account_id, source.id, copy.id, newIds, now, to.accountId);
  }
  return { copy, fields, newIds };
}

function withoutId<T extends { id: number }>(row: T): Omit<T, 'id'> {
  const { id: _id, ...rest } = row;
  return rest;
}
