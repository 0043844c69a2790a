import type { KeyObject } from 'node:crypto';
import type { Transaction } from 'kysely';
import { SealError, type FormKeys } from '../../crypto/envelope.js';
import type { AppContext } from '../../context.js';
import type { Database, FieldRow, FormRow, SubmissionRow } from '../../db/schema.js';
import { engineOf } from '../../db/engine.js';
import { transact } from '../../db/transaction.js';
import { WriteBatcher } from '../../db/write-batcher.js';
import { AppError, ConflictError, NotFoundError } from '../../errors.js';
import { VersionedCache } from '../../http/versioned-cache.js';
import { fieldsBytes, toDefinition } from '../fields/definition.js';
import * as fieldsRepo from '../fields/repository.js';
import * as formsRepo from '../forms/repository.js';
import { settingsOf } from '../forms/schemas.js';
import { sealingKeyOf } from '../encryption/keys.js';
import * as repo from './repository.js';
import { isSealed, openData } from './sealing.js';
import { type FieldForValues, type StoredValue } from './values.js';
import type { FormEventConfig } from '../events/publish.js';
import type { AccountScope, FormRef, SubmissionRef } from '../permissions/caller.js';

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
  /**
   * The webhooks and emails that act on its events, once a create has read them: a change to
   * them moves the form's revision, so they are as current as the definition.
   */
  eventConfig?: FormEventConfig;
  /** The form's submission limit (settings.submissionLimit), read once per definition. */
  submissionLimit: number | undefined;
}

export interface SubmissionsDeps {
  ctx: AppContext;
  definitions: VersionedCache<FormDefinition>;
  /** Totals of filtered lists, per form and filter, under the form's submissions version. */
  totals: VersionedCache<number>;
  /**
   * Runs a write in one transaction: a group commit with the writes that arrive meanwhile
   * where the database has one writer (see WriteBatcher), else a transaction of its own.
   */
  write: <T>(job: (trx: Transaction<Database>) => Promise<T>) => Promise<T>;
}

export function submissionsDeps(ctx: AppContext): SubmissionsDeps {
  // SQLite has one writer, and every commit writes its pages: a batch pays that once. On
  // PostgreSQL each write runs on a pooled connection of its own, concurrently: no row is
  // written by every submission of a form (see forms/counts.ts), and the server groups
  // concurrent commits' WAL flushes itself.
  const batchSize = engineOf(ctx.db).writeBatchSize;
  const batcher = batchSize === undefined ? undefined : new WriteBatcher(ctx.db, batchSize);
  return {
    ctx,
    // The budget is shared with nothing else.
    definitions: new VersionedCache<FormDefinition>(16 * 1024 * 1024, (d) => 2048 + fieldsBytes(d.fields)),
    totals: new VersionedCache<number>(4 * 1024 * 1024, () => 512),
    write: (job) => (batcher ? batcher.run(job) : transact(ctx.db, job)),
  };
}

export type DataMap = Map<number, StoredValue>;

/**
 * The values as a JSON object's text, keyed by field id in ascending order: what
 * `JSON.stringify(Object.fromEntries(data))` gives (integer keys go in ascending order), in
 * under half its time on a create's ten values, since the object it made had its integer keys
 * as dictionary elements, which JSON.stringify walks slowly (docs/performance.md, "Forty-eighth
 * pass"). Field ids are positive integers, so no key needs escaping.
 */
export function dataJson(data: DataMap): string {
  const ids = [...data.keys()].sort((a, b) => a - b);
  let json = '{';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    json += `${i === 0 ? '"' : ',"'}${id}":${JSON.stringify(data.get(id))}`;
  }
  return json + '}';
}

/** The one way a form's definition is made, for requests and background conversions alike. */
export function buildDefinition(form: FormRow, rows: FieldRow[], secretKey: string): FormDefinition {
  const fields = rows.map((r) => ({ id: r.id, ...toDefinition(r) }));
  return {
    form,
    formId: form.id,
    fields,
    byId: new Map(fields.map((f) => [f.id, f])),
    submissionLimit: settingsOf(form).submissionLimit,
    ...sealingOf(secretKey, form),
  };
}

/** A live form's definition, from the cache while its revision has not moved; 404 for no such form. */
export async function loadDefinition(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
): Promise<FormDefinition> {
  const revision = await formsRepo.findFormRevision(deps.ctx.db, accountId, formId);
  if (revision === undefined) throw new NotFoundError('form_not_found');
  return definitionAt(deps, accountId, formId, revision);
}

/** loadDefinition with the form's submission count and write version, read in the same statement. */
export async function loadDefinitionAndCounts(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
): Promise<{ def: FormDefinition; submissionsCount: number; submissionsVersion: number }> {
  const version = await formsRepo.findFormVersion(deps.ctx.db, accountId, formId);
  if (!version) throw new NotFoundError('form_not_found');
  const def = await definitionAt(deps, accountId, formId, version.revision);
  return { def, submissionsCount: version.submissionsCount, submissionsVersion: version.submissionsVersion };
}

/**
 * The definition this process last kept for the form, without reading the form's revision:
 * possibly out of date, so only for a write that checks the revision inside its transaction
 * and is made again against loadDefinition when that check fails (see createSubmission).
 */
export function keptDefinition(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
): FormDefinition | undefined {
  return deps.definitions.latest(definitionKey(accountId, formId));
}

function definitionKey(accountId: number, formId: number): string {
  return `${accountId}:${formId}`;
}

async function definitionAt(
  deps: SubmissionsDeps,
  accountId: number,
  formId: number,
  revision: number,
): Promise<FormDefinition> {
  const { db } = deps.ctx;
  const key = definitionKey(accountId, formId);
  let def = deps.definitions.get(key, String(revision));
  if (!def) {
    const [form, rows] = await Promise.all([
      formsRepo.findForm(db, accountId, formId),
      fieldsRepo.listFields(db, accountId, formId),
    ]);
    if (!form) throw new NotFoundError('form_not_found');
    def = buildDefinition(form, rows, deps.ctx.config.secretKey);
    deps.definitions.set(key, String(revision), def);
  }
  return def;
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
export async function keysFor(
  deps: SubmissionsDeps,
  def: FormDefinition,
  password: string | undefined,
): Promise<FormKeys | undefined> {
  return def.form.encryption_key === null ? undefined : deps.ctx.formKeys.unlock(def.form, password);
}

/** A row's values; a sealed row needs the form's keys (keysFor), which the caller has checked. */
export function parseData(
  def: FormDefinition,
  row: Pick<SubmissionRow, 'id' | 'data'>,
  keys: FormKeys | undefined,
): DataMap {
  return new Map(Object.entries(parseDataObject(def, row, keys)).map(([k, v]) => [Number(k), v]));
}

/** A row's values keyed by field id as JSON has them (opened first when sealed): for hot loops such as exports. */
export function parseDataObject(
  def: FormDefinition,
  row: Pick<SubmissionRow, 'id' | 'data'>,
  keys: FormKeys | undefined,
): Record<string, StoredValue> {
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
  return JSON.parse(json) as Record<string, StoredValue>;
}

export async function requireSubmission(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { submissionId: id }: SubmissionRef,
): Promise<{ row: SubmissionRow; def: FormDefinition }> {
  const row = await repo.findSubmission(deps.ctx.db, accountId, id);
  if (!row) throw new NotFoundError('submission_not_found');
  const def = await loadDefinition(deps, { accountId }, { formId: row.form_id });
  return { row, def };
}
