import type { KeyObject } from 'node:crypto';
import type { Transaction } from 'kysely';
import { SealError, type FormKeys } from '../../crypto/envelope.js';
import type { AppContext } from '../../context.js';
import type { Database, FieldRow, FormRow, SubmissionRow } from '../../db/schema.js';
import { transact } from '../../db/transaction.js';
import { WriteBatcher } from '../../db/write-batcher.js';
import {
  AppError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  type CodeWithStatus,
  type ErrorDetail,
} from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { VersionedCache } from '../../http/versioned-cache.js';
import { toDefinition } from '../fields/definition.js';
import * as fieldsRepo from '../fields/repository.js';
import { TYPE_RULES } from '../fields/types.js';
import * as formsRepo from '../forms/repository.js';
import type { FormSettings } from '../forms/schemas.js';
import * as uploadsRepo from '../uploads/repository.js';
import { enqueue } from '../../jobs/outbox.js';
import { removeFilesJob } from '../uploads/jobs.js';
import { commitFileMoves, convertFiles, discardCopies, openDownload, type Download } from '../uploads/service.js';
import { commitFiles, discardInline, resolveFiles, storeInline } from './files.js';
import { easternDay, lowerBound, parseWallTime, upperBound } from './eastern-time.js';
import { fieldToken, formToken, queryWords, words, type Term } from './keywords.js';
import { sealingKeyOf } from '../encryption/keys.js';
import * as repo from './repository.js';
import { blindValue, isSealed, openData, sealData } from './sealing.js';
import type {
  AccountSearchQuery,
  CountQuery,
  Submission,
  SubmissionCreate,
  SubmissionDataEntry,
  SubmissionFilters,
  SubmissionListItem,
  SubmissionListQuery,
  SubmissionUpdate,
} from './schemas.js';
import {
  displayValue,
  fileRefs,
  normalize,
  readValue,
  searchKeys,
  ValueError,
  visibleFields,
  type FieldForValues,
  type StoredValue,
} from './values.js';

/** What reading values needs of a form: its fields, and for an encrypted form what sealing needs. */
export interface FormShape {
  formId: number;
  fields: FieldForValues[];
  byId: Map<number, FieldForValues>;
  seal?: Sealing;
  /**
   * While a conversion runs, unique values are stored plain in some rows and as HMACs in
   * others; checks then look for both (this is the SECRET_KEY that makes the HMACs).
   */
  uniqueBothWays?: string;
}

/** An encrypted form's public key: what storing a submission needs (reading needs the password). */
export interface Sealing {
  form: Pick<FormRow, 'view_key'>;
  publicKey: KeyObject;
  secretKey: string;
}

/** A form as submissions see it: the row and its fields, cached per process under the form's revision. */
export interface FormDefinition extends FormShape {
  form: FormRow;
}

export interface SubmissionsDeps {
  ctx: AppContext;
  definitions: VersionedCache<FormDefinition>;
  /** Totals of filtered lists, per form and filter, under the form's submissions version. */
  totals: VersionedCache<number>;
  /** Runs a write in a group commit with the writes that arrive meanwhile (see WriteBatcher). */
  write: <T>(job: (trx: Transaction<Database>) => Promise<T>) => Promise<T>;
}

export function submissionsDeps(ctx: AppContext): SubmissionsDeps {
  // A definition costs about 1 KB per field in memory; the budget is shared with nothing else.
  // On PostgreSQL too: every submission updates its form's counter row, and one transaction
  // per submission would queue them all on that row's lock. Batches stay at 32 there, within
  // the subtransactions a PostgreSQL backend caches (64).
  const batcher = new WriteBatcher(ctx.db, ctx.dialect === 'sqlite' ? 64 : 32);
  return {
    ctx,
    definitions: new VersionedCache<FormDefinition>(16 * 1024 * 1024, (d) => 2048 + d.fields.length * 1024),
    totals: new VersionedCache<number>(4 * 1024 * 1024, () => 512),
    write: (job) => batcher.run(job),
  };
}

export type DataMap = Map<number, StoredValue>;

/** The API's base path, for download links in records (the same under /api/v2). */
const API_PATH = '/api/v2025';

/** The one way a form's definition is made, for requests and background conversions alike. */
function buildDefinition(form: FormRow, rows: FieldRow[], secretKey: string): FormDefinition {
  const fields = rows.map((r) => ({ id: r.id, ...toDefinition(r) }));
  return { form, formId: form.id, fields, byId: new Map(fields.map((f) => [f.id, f])), ...sealingOf(secretKey, form) };
}

async function loadDefinition(
  deps: SubmissionsDeps,
  accountId: number,
  formId: number,
): Promise<{ def: FormDefinition; submissionsCount: number; submissionsVersion: number }> {
  const { db } = deps.ctx;
  const version = await formsRepo.findFormVersion(db, accountId, formId);
  if (!version) throw new NotFoundError('form_not_found');
  const key = `${accountId}:${formId}`;
  let def = deps.definitions.get(key, String(version.revision));
  if (!def) {
    const [form, rows] = await Promise.all([
      formsRepo.findForm(db, accountId, formId),
      fieldsRepo.listFields(db, accountId, formId),
    ]);
    if (!form) throw new NotFoundError('form_not_found');
    def = buildDefinition(form, rows, deps.ctx.config.secretKey);
    deps.definitions.set(key, String(version.revision), def);
  }
  return { def, submissionsCount: version.submissionsCount, submissionsVersion: version.submissionsVersion };
}

/** How new writes store a form's submissions (see sealingKeyOf). */
export function sealingOf(secretKey: string, form: FormRow): Pick<FormShape, 'seal' | 'uniqueBothWays'> {
  const publicKey = sealingKeyOf(form);
  return {
    seal: publicKey && { form, publicKey, secretKey },
    uniqueBothWays: form.encryption_state === null ? undefined : secretKey,
  };
}

/** The keys of an encrypted form, or undefined for a plain one; 401 without the right password. */
async function keysFor(
  deps: SubmissionsDeps,
  def: FormDefinition,
  password: string | undefined,
): Promise<FormKeys | undefined> {
  return def.form.encryption_key === null ? undefined : deps.ctx.formKeys.unlock(def.form, password);
}

/** A row's values; a sealed row needs the form's keys (keysFor), which the caller has checked. */
function parseData(def: FormDefinition, row: Pick<SubmissionRow, 'id' | 'data'>, keys: FormKeys | undefined): DataMap {
  let json = row.data;
  if (isSealed(json)) {
    if (!keys) throw new ConflictError('submission_sealed');
    try {
      json = openData(def.form, keys, json, row.id);
    } catch (error) {
      if (!(error instanceof SealError)) throw error;
      throw new AppError('submission_integrity_failed', undefined, { cause: error });
    }
  }
  return new Map(Object.entries(JSON.parse(json) as Record<string, StoredValue>).map(([k, v]) => [Number(k), v]));
}

function fail(code: CodeWithStatus<400>, problems: ErrorDetail[]): never {
  const first = problems[0]!;
  throw new BadRequestError(code, `${first.property}: ${first.message}`, { details: problems });
}

/** Reads the values sent into data (in place); every problem is collected before failing. */
function applyValues(def: FormShape, inputs: SubmissionCreate['fields'], data: DataMap, now: number): void {
  const problems: ErrorDetail[] = [];
  const seen = new Set<number>();
  inputs.forEach((input, i) => {
    const id = Number(input.id);
    const field = def.byId.get(id);
    if (!field) {
      problems.push({ property: `body.fields[${i}].id`, message: `this form has no field ${id}` });
      return;
    }
    if (seen.has(id)) {
      problems.push({ property: `body.fields[${i}].id`, message: `field ${id} is given twice` });
      return;
    }
    seen.add(id);
    try {
      const value = readValue(field, input.value, now);
      if (value === null) data.delete(id);
      else data.set(id, value);
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
      problems.push({ property: `body.fields[${i}].value`, message: `${field.label} (${id}): ${error.message}` });
    }
  });
  if (problems.length > 0) fail('invalid_submission', problems);
}

function checkRequired(def: FormShape, data: DataMap): void {
  const visible = visibleFields(def.fields, data);
  const problems = def.fields
    .filter((f) => f.required && TYPE_RULES[f.type].input && visible.has(f.id) && !data.has(f.id))
    .map((f) => ({ property: `body.fields(id=${f.id})`, message: `${f.label} (${f.id}) is required` }));
  if (problems.length > 0) fail('required_field_missing', problems);
}

/**
 * Checks what was sent against the form and makes everything that is stored for it: the
 * data, the pretty name, the full-text tokens and the unique values. data holds the values
 * already stored (on edit) and is changed in place. Throws a 400 naming each problem.
 */
export function prepareSubmission(
  def: FormShape,
  inputs: SubmissionCreate['fields'],
  data: DataMap,
  now: number,
): repo.SubmissionWrite {
  applyValues(def, inputs, data, now);
  checkRequired(def, data);
  return searchable(def, data, now);
}

function searchable(def: FormShape, data: DataMap, now: number): repo.SubmissionWrite {
  const { tokens, unique, prettyName } = derived(def, data);
  const json = JSON.stringify(Object.fromEntries(data));
  const seal = def.seal;
  const both = def.uniqueBothWays;
  if (!seal) {
    const alt = (u: { fieldId: number; norm: string }) =>
      both === undefined ? {} : { alt: blindValue(both, def.formId, u.fieldId, u.norm) };
    return { data: json, prettyName, tokens: [...tokens], unique: unique.map((u) => ({ ...u, ...alt(u) })), now };
  }
  // Nothing searchable in the clear: the index gets the form token alone, unique values their HMAC.
  return {
    // Sealed once the row has its id, which the seal is bound to.
    data: (id: number) => sealData(seal.form, seal.publicKey, json, id),
    prettyName: null,
    tokens: [formToken(def.formId)],
    unique: unique.map((u) => ({
      fieldId: u.fieldId,
      norm: blindValue(seal.secretKey, def.formId, u.fieldId, u.norm),
      ...(both !== undefined && { alt: u.norm }),
    })),
    now,
  };
}

/** What a submission's values make for searching: index tokens, unique values and the pretty name. */
function derived(
  def: FormShape,
  data: DataMap,
): { tokens: Set<string>; unique: repo.SubmissionWrite['unique']; prettyName: string | null } {
  const tokens = new Set<string>([formToken(def.formId)]);
  const unique: repo.SubmissionWrite['unique'] = [];
  let prettyName: string | null = null;
  let email: string | null = null;
  for (const field of def.fields) {
    const value = data.get(field.id);
    if (value === undefined) continue;
    const shown = displayValue(field, value);
    for (const key of searchKeys(field, value)) {
      tokens.add(fieldToken(field.id, key));
      for (const word of words(key)) tokens.add(word);
    }
    for (const word of words(shown)) tokens.add(word);
    if (field.unique) unique.push({ fieldId: field.id, norm: normalize(shown) });
    if (field.type === 'name' && prettyName === null) prettyName = shown;
    if (field.type === 'email' && email === null) email = String(value);
  }
  return { tokens, unique, prettyName: prettyName ?? email };
}

/** Whether values hold every search term (how an encrypted form is searched, once opened). */
function matches(tokens: Set<string>, terms: Term[]): boolean {
  return terms.every((t) => (t.prefix ? [...tokens].some((x) => x.startsWith(t.token)) : tokens.has(t.token)));
}

async function checkUnique(
  trx: Transaction<Database>,
  def: FormDefinition,
  write: repo.SubmissionWrite,
  except?: number,
): Promise<void> {
  const problems: ErrorDetail[] = [];
  for (const v of write.unique) {
    const held = async (norm: string) =>
      (await repo.findUniqueHolder(trx, def.form.id, v.fieldId, norm, except)) !== undefined;
    if ((await held(v.norm)) || (v.alt !== undefined && (await held(v.alt)))) {
      const field = def.byId.get(v.fieldId)!;
      problems.push({
        property: `body.fields(id=${field.id})`,
        message: `${field.label} (${field.id}) must be unique; this value was already submitted`,
      });
    }
  }
  if (problems.length > 0) fail('not_unique', problems);
}

/** Files as the API shows them: each with the path that downloads it. */
function shownValue(submissionId: number, fieldId: number, value: StoredValue): unknown {
  const files = fileRefs(value);
  if (!files) return value;
  return files.map((f, index) => ({
    ...f,
    url: `${API_PATH}/submissions/${submissionId}/upload?fieldId=${fieldId}&index=${index}`,
  }));
}

function entries(def: FormDefinition, submissionId: number, data: DataMap): SubmissionDataEntry[] {
  const out: SubmissionDataEntry[] = [];
  for (const field of def.fields) {
    const stored = data.get(field.id);
    if (stored === undefined) continue;
    const value = shownValue(submissionId, field.id, stored);
    out.push({
      field: field.id,
      label: field.label,
      type: field.type,
      value,
      displayValue: displayValue(field, stored),
      parsedValue: value,
    });
  }
  return out;
}

function baseRecord(row: SubmissionRow) {
  return {
    id: row.id,
    formId: row.form_id,
    timestamp: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
    userAgent: row.user_agent,
    remoteAddr: row.remote_addr,
    latitude: row.latitude,
    longitude: row.longitude,
  };
}

function prettyNameOf(def: FormDefinition, row: SubmissionRow, data: DataMap): string | null {
  return isSealed(row.data) ? derived(def, data).prettyName : row.pretty_name;
}

function toSubmission(def: FormDefinition, row: SubmissionRow, data: DataMap): Submission {
  return { ...baseRecord(row), prettyName: prettyNameOf(def, row, data), data: entries(def, row.id, data) };
}

export interface RequestMeta {
  userAgent: string;
  remoteAddr: string;
}

/**
 * Runs inside the creating transaction, after the insert: how idempotency records its response
 * atomically. replay is what may be kept for a replay: for an encrypted form, the record without
 * its values, since the service keeps no plaintext copy of them.
 */
export type OnCreated = (trx: Transaction<Database>, replay: Submission) => Promise<void>;

class StaleDefinition extends Error {}

/**
 * Notes the change on the form and checks that the form is still at the revision the values
 * were checked and stored against. A form changed meanwhile (a field edited, encryption turned
 * on or off) fails the write, which is then made again against the new definition.
 */
async function noteChange(
  trx: Transaction<Database>,
  def: FormDefinition,
  accountId: number,
  delta: number,
): Promise<void> {
  const revision = await formsRepo.noteSubmissionChange(trx, accountId, def.formId, delta);
  if (revision !== def.form.revision) throw new StaleDefinition();
}

async function againIfStale<T>(attempt: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof StaleDefinition)) throw error;
      if (tries === 3) throw new ConflictError('form_changed');
    }
  }
}

/** Creates a submission; made again against the new definition if the form changed meanwhile. */
export const createSubmission = (...args: Parameters<typeof createOnce>): Promise<Submission> =>
  againIfStale(() => createOnce(...args));

async function createOnce(
  deps: SubmissionsDeps,
  accountId: number,
  formId: number,
  input: SubmissionCreate,
  meta: RequestMeta,
  onCreated?: OnCreated,
): Promise<Submission> {
  const { def, submissionsCount } = await loadDefinition(deps, accountId, formId);
  if (def.form.inactive === 1) throw new ConflictError('form_inactive');
  const limit = (JSON.parse(def.form.settings) as FormSettings).submissionLimit;
  if (limit !== undefined && submissionsCount >= limit)
    throw new ConflictError('form_full', `This form has reached its limit of ${limit} submissions`);

  const { ctx } = deps;
  const files = await resolveFiles(ctx, def, accountId, input.fields);
  const data: DataMap = new Map();
  const write = prepareSubmission(def, files.inputs, data, ctx.clock.now());

  // Inline bytes go to storage before the transaction (group commit: no slow I/O inside it)
  // and are removed again if the transaction does not commit.
  await storeInline(ctx, files.plan);
  try {
    return await deps.write(async (trx) => {
      await checkUnique(trx, def, write);
      const row = await repo.insertSubmission(
        trx,
        ctx.dialect,
        {
          accountId,
          formId,
          userAgent: meta.userAgent,
          remoteAddr: meta.remoteAddr,
          latitude: input.latitude ?? null,
          longitude: input.longitude ?? null,
        },
        write,
      );
      await commitFiles(trx, accountId, files.plan, row.id, ctx.clock.now());
      await noteChange(trx, def, accountId, 1);
      const submission = toSubmission(def, row, data);
      await onCreated?.(trx, def.seal ? { ...submission, prettyName: null, data: [] } : submission);
      return submission;
    });
  } catch (error) {
    await discardInline(ctx, files.plan);
    throw error;
  }
}

async function requireSubmission(
  deps: SubmissionsDeps,
  accountId: number,
  id: number,
): Promise<{ row: SubmissionRow; def: FormDefinition }> {
  const row = await repo.findSubmission(deps.ctx.db, accountId, id);
  if (!row) throw new NotFoundError('submission_not_found');
  const { def } = await loadDefinition(deps, accountId, row.form_id);
  return { row, def };
}

export async function getSubmission(
  deps: SubmissionsDeps,
  accountId: number,
  id: number,
  password?: string,
): Promise<Submission> {
  const { row, def } = await requireSubmission(deps, accountId, id);
  return toSubmission(def, row, parseData(def, row, await keysFor(deps, def, password)));
}

/** Edits open the stored values with the password and seal the result again. */
export const updateSubmission = (...args: Parameters<typeof updateOnce>): Promise<Submission> =>
  againIfStale(() => updateOnce(...args));

async function updateOnce(
  deps: SubmissionsDeps,
  accountId: number,
  id: number,
  input: SubmissionUpdate,
  password?: string,
): Promise<Submission> {
  const { row, def } = await requireSubmission(deps, accountId, id);
  const { ctx } = deps;
  const data = parseData(def, row, await keysFor(deps, def, password));
  const files = await resolveFiles(ctx, def, accountId, input.fields, { submissionId: id, data });
  const write = prepareSubmission(def, files.inputs, data, ctx.clock.now());
  await storeInline(ctx, files.plan);
  try {
    return await deps.write(async (trx) => {
      await checkUnique(trx, def, write, id);
      const updated = await repo.updateSubmission(trx, ctx.dialect, accountId, row, write);
      const replaced = await commitFiles(trx, accountId, files.plan, id, ctx.clock.now());
      if (replaced.length > 0) await enqueue(trx, removeFilesJob, { keys: replaced });
      await noteChange(trx, def, accountId, 0);
      return toSubmission(def, updated, data);
    });
  } catch (error) {
    await discardInline(ctx, files.plan);
    throw error;
  }
}

export async function deleteSubmission(
  deps: SubmissionsDeps,
  accountId: number,
  id: number,
): Promise<{ id: number; formId: number; deleted: true }> {
  const { ctx } = deps;
  return deps.write(async (trx) => {
    const row = await repo.findSubmission(trx, accountId, id);
    if (!row) throw new NotFoundError('submission_not_found');
    const uploads = await uploadsRepo.uploadsOfSubmission(trx, id);
    const objects = await uploadsRepo.deleteUploads(
      trx,
      uploads.map((u) => u.file_key),
    );
    await repo.deleteSubmission(trx, ctx.dialect, accountId, id);
    await formsRepo.noteSubmissionChange(trx, accountId, row.form_id, -1);
    // The objects go once this commits, through the outbox.
    if (objects.length > 0) await enqueue(trx, removeFilesJob, { keys: objects });
    return { id, formId: row.form_id, deleted: true };
  });
}

function timeBound(text: string | undefined, property: string, bound: 'lower' | 'upper'): number | undefined {
  if (text === undefined) return undefined;
  const t = parseWallTime(text);
  if (!t) fail('validation_failed', [{ property, message: 'is not a real date and time' }]);
  return bound === 'lower' ? lowerBound(t) : upperBound(t);
}

/** The list filters as the repository takes them; field criteria must name fields of the form. */
function resolveFilter(def: FormDefinition | undefined, q: SubmissionFilters): repo.ResolvedFilter {
  const from = timeBound(q.minTime, 'query.minTime', 'lower');
  const to = timeBound(q.maxTime, 'query.maxTime', 'upper');
  const terms: Term[] = [];
  for (const [n, c] of Object.entries(q.search ?? {}).sort(([a], [b]) => Number(a) - Number(b))) {
    if (def && !def.byId.has(c.fieldId))
      fail('validation_failed', [
        { property: `query.search.${n}.fieldId`, message: `this form has no field ${c.fieldId}` },
      ]);
    const prefix = c.value.endsWith('*');
    terms.push({ token: fieldToken(c.fieldId, normalize(prefix ? c.value.slice(0, -1) : c.value)), prefix });
  }
  const keywords = q.keyword === undefined ? [] : queryWords(q.keyword);
  for (const word of keywords) terms.push({ token: word, prefix: true });
  return { from, to, terms, impossible: q.keyword !== undefined && keywords.length === 0 };
}

function isUnfiltered(f: repo.ResolvedFilter): boolean {
  return f.from === undefined && f.to === undefined && f.terms.length === 0 && !f.impossible;
}

type ItemShape = Pick<SubmissionListQuery, 'data' | 'expandData' | 'prettyName' | 'dataFormat'>;

function showsData(q: ItemShape): boolean {
  return q.data || q.expandData || q.dataFormat === 'standardized';
}

function listItem(
  def: FormDefinition,
  row: SubmissionRow,
  q: ItemShape,
  keys: FormKeys | undefined,
): SubmissionListItem {
  const item: SubmissionListItem = baseRecord(row);
  const data = showsData(q) || (q.prettyName && isSealed(row.data)) ? parseData(def, row, keys) : undefined;
  if (q.prettyName) item.prettyName = data ? prettyNameOf(def, row, data) : row.pretty_name;
  if (data && showsData(q)) {
    const list = entries(def, row.id, data);
    item.data =
      q.dataFormat === 'standardized'
        ? list
        : Object.fromEntries(list.map((e) => [String(e.field), q.expandData ? e : { field: e.field, value: e.value }]));
  }
  return item;
}

/**
 * An encrypted form's index holds nothing to match, so a search opens every submission in the
 * time range and tests it here: one decryption per submission of the form, per request.
 */
async function searchSealed(
  deps: SubmissionsDeps,
  accountId: number,
  def: FormDefinition,
  keys: FormKeys,
  filter: repo.ResolvedFilter,
  page: repo.PageRequest,
): Promise<repo.Listing> {
  const { db, dialect } = deps.ctx;
  const range: repo.ResolvedFilter = { from: filter.from, to: filter.to, terms: [] };
  const rows: SubmissionRow[] = [];
  let total = 0;
  let after: number | undefined;
  for (;;) {
    const batch = await repo.nextBatch(db, dialect, accountId, def.formId, range, after, page.order, 500);
    for (const row of batch) {
      if (!matches(derived(def, parseData(def, row, keys)).tokens, filter.terms)) continue;
      if (total >= page.offset && rows.length < page.limit) rows.push(row);
      total++;
    }
    if (batch.length < 500) return { rows, total };
    after = batch[batch.length - 1]!.id;
  }
}

export async function listSubmissions(
  deps: SubmissionsDeps,
  accountId: number,
  formId: number,
  q: SubmissionListQuery,
  password?: string,
): Promise<Page & { submissions: SubmissionListItem[] }> {
  const { def, submissionsCount, submissionsVersion } = await loadDefinition(deps, accountId, formId);
  const filter = resolveFilter(def, q);
  // The password is needed to show values or names, and to search, on an encrypted form.
  const keys = showsData(q) || q.prettyName || filter.terms.length > 0 ? await keysFor(deps, def, password) : undefined;
  if (keys && filter.terms.length > 0) {
    const order = q.order.toLowerCase() as 'asc' | 'desc';
    const { rows, total } = await searchSealed(deps, accountId, def, keys, filter, {
      order,
      limit: q.pageSize,
      offset: (q.pageNumber - 1) * q.pageSize,
    });
    return { submissions: rows.map((r) => listItem(def, r, q, keys)), ...page(total, q.pageNumber, q.pageSize) };
  }
  // Counting a filtered million rows costs more than the page; the count holds until a
  // submission of the form changes, which moves the version it is kept under.
  const totalKey = `${formId}:${JSON.stringify([filter.from, filter.to, filter.terms, filter.impossible])}`;
  const version = String(submissionsVersion);
  const { rows, total } = await repo.listSubmissions(deps.ctx.db, deps.ctx.dialect, accountId, formId, filter, {
    order: q.order.toLowerCase() as 'asc' | 'desc',
    limit: q.pageSize,
    offset: (q.pageNumber - 1) * q.pageSize,
    knownTotal: isUnfiltered(filter) ? submissionsCount : deps.totals.get(totalKey, version),
  });
  deps.totals.set(totalKey, version, total);
  return { submissions: rows.map((r) => listItem(def, r, q, keys)), ...page(total, q.pageNumber, q.pageSize) };
}

/**
 * Across every live form of the account: keyword search, newest first, with the standardized
 * data. Encrypted forms index no words, so their submissions are never found here.
 */
export async function searchAccount(
  deps: SubmissionsDeps,
  accountId: number,
  q: AccountSearchQuery,
  visibleTo?: number,
): Promise<Page & { submissions: SubmissionListItem[] }> {
  const keywords = queryWords(q.search);
  const filter: repo.ResolvedFilter = {
    terms: keywords.map((token) => ({ token, prefix: true })),
    impossible: keywords.length === 0,
    visibleTo,
  };
  const { rows, total } = await repo.listSubmissions(deps.ctx.db, deps.ctx.dialect, accountId, undefined, filter, {
    order: 'desc',
    limit: q.pageSize,
    offset: (q.pageNumber - 1) * q.pageSize,
  });
  const submissions: SubmissionListItem[] = [];
  for (const row of rows) {
    const { def } = await loadDefinition(deps, accountId, row.form_id);
    // A form that is encrypted, or being converted, shows no values here: that takes its password.
    const sealed = def.form.encryption_key !== null;
    submissions.push(
      listItem(
        def,
        row,
        { data: !sealed, expandData: !sealed, prettyName: !sealed, dataFormat: sealed ? 'legacy' : 'standardized' },
        undefined,
      ),
    );
  }
  return { submissions, ...page(total, q.pageNumber, q.pageSize) };
}

export async function countSubmissions(
  deps: SubmissionsDeps,
  accountId: number,
  formId: number,
  q: CountQuery,
): Promise<{ formId: number; count: number; from: string | null; to: string | null }> {
  const { submissionsCount } = await loadDefinition(deps, accountId, formId);
  let from: number | undefined;
  let to: number | undefined;
  const start = q.startDate === undefined ? undefined : parseWallTime(q.startDate);
  if (q.startDate !== undefined && !start)
    fail('validation_failed', [{ property: 'query.startDate', message: 'is not a real date and time' }]);
  if (q.lookbackPeriod !== undefined) {
    // The lookback counts whole Eastern days: the day of startDate (or today) and the days before it.
    const day = start ?? { ...easternDay(deps.ctx.clock.now()), hour: 0, minute: 0, second: 0, dateOnly: true };
    const last =
      start && !start.dateOnly
        ? upperBound(start)
        : upperBound({ ...day, hour: 0, minute: 0, second: 0, dateOnly: true });
    const first = new Date(Date.UTC(day.year, day.month - 1, day.day - q.lookbackPeriod + 1));
    from = lowerBound({
      year: first.getUTCFullYear(),
      month: first.getUTCMonth() + 1,
      day: first.getUTCDate(),
      hour: 0,
      minute: 0,
      second: 0,
      dateOnly: true,
    });
    to = last;
  } else if (start) {
    from = lowerBound(start);
  }
  const count =
    from === undefined && to === undefined
      ? submissionsCount
      : await repo.countSubmissions(deps.ctx.db, formId, from, to);
  return { formId, count, from: from === undefined ? null : isoTime(from), to: to === undefined ? null : isoTime(to) };
}

// OWASP's list (= + - @, and a tab or carriage return first), looked for past the blanks and
// line breaks that spreadsheets skip before a formula, and in the full-width forms that some
// of them read as the same signs.
// eslint-disable-next-line no-control-regex -- control characters before a sign are looked through
const FORMULA_START = /^(?:[\t\r]|[\s\u0000-\u001f\u007f]*[=+\-@\uff1d\uff0b\uff0d\uff20])/;

function csvCell(text: string): string {
  // A cell that a spreadsheet would run as a formula is prefixed with a quote mark.
  const safe = FORMULA_START.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export interface ExportStream {
  contentType: string;
  filename: string;
  lines: AsyncGenerator<string>;
}

/**
 * Every matching submission as CSV (one column per input field, displayed values) or as
 * NDJSON (detailed records). Checks the form and the filters first, so that errors come
 * before any byte is sent; then reads in batches of 500 by id, so memory stays flat.
 */
export async function exportSubmissions(
  deps: SubmissionsDeps,
  accountId: number,
  formId: number,
  q: SubmissionFilters & { format: 'csv' | 'ndjson' },
  password?: string,
): Promise<ExportStream> {
  const { def } = await loadDefinition(deps, accountId, formId);
  const filter = resolveFilter(def, q);
  const keys = await keysFor(deps, def, password);
  // An encrypted form is searched by opening each row (see searchSealed); the range still comes from the index.
  const indexed: repo.ResolvedFilter = keys ? { from: filter.from, to: filter.to, terms: [] } : filter;
  const order = q.order.toLowerCase() as 'asc' | 'desc';
  const columns = def.fields.filter((f) => TYPE_RULES[f.type].input);
  const { db, dialect } = deps.ctx;
  async function* lines(): AsyncGenerator<string> {
    if (q.format === 'csv')
      yield `${['id', 'timestamp', 'remoteAddr', 'userAgent', ...columns.map((f) => f.label)].map(csvCell).join(',')}\r\n`;
    let after: number | undefined;
    for (;;) {
      const rows = await repo.nextBatch(db, dialect, accountId, formId, indexed, after, order, 500);
      let chunk = '';
      for (const row of rows) {
        const data = parseData(def, row, keys);
        if (keys && filter.terms.length > 0 && !matches(derived(def, data).tokens, filter.terms)) continue;
        const record = toSubmission(def, row, data);
        if (q.format === 'ndjson') {
          chunk += `${JSON.stringify(record)}\n`;
        } else {
          const shown = new Map(record.data.map((e) => [e.field, e.displayValue]));
          const cells = [
            String(record.id),
            record.timestamp,
            record.remoteAddr,
            record.userAgent,
            ...columns.map((f) => shown.get(f.id) ?? ''),
          ];
          chunk += `${cells.map(csvCell).join(',')}\r\n`;
        }
      }
      if (chunk) yield chunk;
      if (rows.length < 500) return;
      after = rows[rows.length - 1]!.id;
    }
  }
  return {
    contentType: q.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
    filename: `form-${formId}-submissions.${q.format}`,
    lines: lines(),
  };
}

/**
 * One batch of the background conversion that follows turning encryption on ('encrypt') or
 * off ('decrypt'): the form's submissions after `after` still stored the old way are
 * rewritten the new way, data, index and unique values together. Rows say for themselves
 * whether they are sealed, so a batch repeated after a restart changes nothing twice.
 * Returns the last id read, or undefined when no rows are left.
 */
export async function convertBatch(
  deps: SubmissionsDeps,
  formId: number,
  direction: 'encrypt' | 'decrypt',
  keys: FormKeys | undefined,
  after: number | undefined,
  /** Runs in the batch's transaction with the batch's last id: where the job checkpoints. */
  commit: (trx: Transaction<Database>, last: number) => Promise<void>,
  size = 200,
): Promise<number | undefined> {
  const { db, dialect, config } = deps.ctx;
  const form = await formsRepo.findFormById(db, formId);
  if (!form) return undefined;
  const def = buildDefinition(form, await fieldsRepo.listFields(db, form.account_id, formId), config.secretKey);
  const { fields } = def;
  if ((direction === 'encrypt') !== (def.seal !== undefined)) return undefined; // the form moved on: nothing of this job is left to do
  // Files are copied inside a batch, between two checkpoints (which renew the job's lease): keep
  // the batches of forms with file fields small.
  const batch = fields.some((f) => f.type === 'file' || f.type === 'signature') ? Math.min(size, 20) : size;
  const rows = await repo.nextBatch(db, dialect, form.account_id, formId, { terms: [] }, after, 'asc', batch);
  // Files first, outside the transaction (storage I/O); the transaction then switches the uploads over.
  const sealing = direction === 'encrypt';
  const files = await uploadsRepo.filesToConvert(
    db,
    rows.map((r) => r.id),
    sealing,
  );
  const moves =
    files.length === 0
      ? []
      : await convertFiles(deps.ctx, files, sealing ? { publicKey: def.seal!.publicKey } : { keys: keys! });
  await transact(db, async (trx) => {
    await commitFileMoves(trx, moves, sealing);
    let changed = false;
    for (const row of rows) {
      if (isSealed(row.data) === (direction === 'encrypt')) continue;
      const write = searchable(def, parseData(def, row, keys), row.updated_at);
      changed = (await repo.rewriteSubmission(trx, dialect, row, write)) || changed;
    }
    // Cached search totals count what the index holds, which has just changed.
    if (changed) await formsRepo.noteSubmissionChange(trx, form.account_id, formId, 0);
    if (rows.length > 0) await commit(trx, rows[rows.length - 1]!.id);
  }).catch(async (error: unknown) => {
    await discardCopies(deps.ctx, moves);
    throw error;
  });
  return rows.length < batch ? undefined : rows[rows.length - 1]!.id;
}

/** The index-th file of a submission's field; on an encrypted form the password opens it. 404 for no such file. */
export async function openSubmissionFile(
  deps: SubmissionsDeps,
  accountId: number,
  submissionId: number,
  fieldId: number,
  index: number,
  password?: string,
): Promise<Download> {
  const { row, def } = await requireSubmission(deps, accountId, submissionId);
  const keys = await keysFor(deps, def, password);
  const file = fileRefs(parseData(def, row, keys).get(fieldId))?.[index];
  if (!file) throw new NotFoundError('file_not_found');
  return openDownload(deps.ctx, accountId, submissionId, file, keys);
}
