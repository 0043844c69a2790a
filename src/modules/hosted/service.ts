import { changeEpoch } from '../../db/change-epoch.js';
import type { AppContext } from '../../context.js';
import type { FormRow } from '../../db/schema.js';
import { transact } from '../../db/transaction.js';
import { AppError, BadRequestError, NotFoundError, type ErrorDetail } from '../../errors.js';
import { VersionedCache } from '../../http/versioned-cache.js';
import { fieldsBytes, toDefinition } from '../fields/definition.js';
import * as fieldsRepo from '../fields/repository.js';
import * as formsRepo from '../forms/repository.js';
import { settingsOf, type FormSettings } from '../forms/schemas.js';
import type { AccountScope, FormRef } from '../permissions/caller.js';
import { requestHash, withIdempotencyKey } from '../idempotency/service.js';
import { enqueueResumeLinkEmail } from '../emails/resume-link.js';
import { acceptedValues, finishPartial, resumePartial, savePartial, type PartialMeta } from '../partials/service.js';
import type { SubmissionsDeps } from '../submissions/definitions.js';
import { tieToPortalUser } from '../portals/session.js';
import { imageVersion } from '../images/serve.js';
import { imagesOfLists } from '../smartlists/repository.js';
import { createSubmission, type RequestMeta } from '../submissions/write.js';
import { isEmptyInput, readValue, ValueError, visibleFields, type StoredValue } from '../submissions/values.js';
import type { PageCounters } from './counters.js';
import { fieldMessage, type FieldInput, type PageField } from './form-model.js';
import { assetUrls } from './assets.js';
import { pageHeaders } from './headers.js';
import { formPage, type ThemeAssets } from './page.js';
import { pageTheme, type PageTheme } from './theme.js';
import { renderForm, type RenderedForm, type RenderState } from './render.js';
import * as repo from './repository.js';
import { openPrefill, sealPrefill } from './prefill-sealing.js';
import { loadedAt, loadToken, prefillId, prefillToken } from './tokens.js';

/**
 * The hosted form: the page at a form's URL (spec: the form record's url), its submit, its
 * embed HTML, prefill URLs and partial saves. A submit goes through the same service call
 * as POST /forms/{formId}/submissions (checks, idempotency, the outbox's events).
 */

export type FormState = 'open' | 'inactive' | 'full' | 'deleted';

export interface PageDefinition extends RenderedForm {
  form: FormRow;
  /** The form rendered with its defaults and a placeholder load token, for pages without prefill or resume. */
  plain: string;
  /** The whole page around plain, as bytes cut where the token goes, and its headers: a page view joins them. */
  document: [Buffer, Buffer];
  headers: Record<string, string>;
  /** The form's theme: its sheet (served at /f/{viewKey}/theme.css) and logo. */
  theme: PageTheme;
}

/** Stands where each page's own load token goes in the cached HTML (no input can produce it: it is escaped). */
const TOKEN_SLOT = '\u0000load-token\u0000';

export interface HostedDeps {
  ctx: AppContext;
  submissions: SubmissionsDeps;
  counters: PageCounters;
  definitions: VersionedCache<PageDefinition>;
  /** Forms as pages last read them, by view key, with when and at which change epoch (see pageForm). */
  recent: Map<string, { at: number; epoch: string | undefined; def: PageDefinition | undefined }>;
}

/**
 * On PostgreSQL, how long a page view may show a form as this process last read it: a
 * second. Reading the form costs as much as the rest of the view, and a form's page can bear
 * being a second late; submits, partial saves and upload URLs always read the form anew. On
 * SQLite every page is exact: a form read is kept only while nothing has been written.
 */
export const PAGE_FRESHNESS_MS = 1000;

export function hostedDeps(ctx: AppContext, submissions: SubmissionsDeps, counters: PageCounters): HostedDeps {
  return {
    ctx,
    submissions,
    counters,
    // What a page keeps: its form's HTML as text and the page as bytes, and its fields with their options.
    definitions: new VersionedCache<PageDefinition>(
      8 * 1024 * 1024,
      (d) => 4096 + d.plain.length * 2 + d.document[0].length + d.document[1].length + fieldsBytes(d.fields),
    ),
    recent: new Map(),
  };
}

export function stateOf(form: FormRow, settings: FormSettings = settingsOf(form)): FormState {
  if (form.deleted_at !== null) return 'deleted';
  if (form.inactive === 1) return 'inactive';
  const limit = settings.submissionLimit;
  return limit !== undefined && form.submissions_count >= limit ? 'full' : 'open';
}

async function definitionOf(deps: HostedDeps, form: FormRow): Promise<PageDefinition> {
  const cached = deps.definitions.get(form.view_key, String(form.revision));
  // The row read on this request carries what changes between revisions (counts, state).
  if (cached) return { ...cached, form };
  const rows = await fieldsRepo.listFieldsWithLists(deps.ctx.db, form.account_id, form.id);
  const settings = settingsOf(form);
  const base: RenderedForm = {
    viewKey: form.view_key,
    name: form.name,
    submitButtonTitle: form.submit_button_title,
    settings,
    fields: await withOptionImages(deps, form.view_key, rows),
    saveAndResume: settings.saveAndResume === true,
  };
  const plain = renderForm(base, { ...emptyState(base), loadToken: TOKEN_SLOT });
  const theme = await pageTheme(deps.ctx.db, form);
  const whole = formPage({
    name: base.name,
    description: settings.description,
    lang: settings.language,
    assets: await assetUrls(),
    theme: themeAssets(form.view_key, theme),
    form: plain,
  });
  const cut = whole.indexOf(TOKEN_SLOT);
  // Bytes, encoded once: the page holds non-ASCII text, which would otherwise be encoded anew on every view.
  const document: [Buffer, Buffer] = [
    Buffer.from(whole.slice(0, cut)),
    Buffer.from(whole.slice(cut + TOKEN_SLOT.length)),
  ];
  const headers = pageHeaders(deps.ctx.config, settings.redirectUrl, theme.logoOrigin);
  const def = { ...base, form, plain, document, headers, theme };
  deps.definitions.set(form.view_key, String(form.revision), def);
  return def;
}

/** What the page links to for the form's theme: the sheet under its hash, so that it is cached until it changes. */
export function themeAssets(viewKey: string, theme: PageTheme): ThemeAssets {
  return { css: `/f/${encodeURIComponent(viewKey)}/theme.css?v=${theme.hash}`, logoUrl: theme.logoUrl };
}

/**
 * The fields as the page shows them: select, radio and checkbox fields whose smart list uses
 * images carry their options' image URLs (served by GET /f/{viewKey}/options/{optionId}/image).
 * An image's URL names its version, so a new image is a new URL: a change to an image gives
 * the forms that show it a new revision (smartlists/service.ts), and so a new page.
 */
async function withOptionImages(
  deps: HostedDeps,
  viewKey: string,
  rows: fieldsRepo.FieldWithList[],
): Promise<PageField[]> {
  // A list's options are one array for all the fields that show them (render.ts escapes them once).
  const fields: PageField[] = rows.map(({ row, listOptions }) => ({
    id: row.id,
    ...toDefinition(row),
    ...(listOptions && { options: listOptions }),
  }));
  const listIds = rows
    .filter(({ row }) => row.smart_list_id !== null && CHOICES.has(row.type))
    .map(({ row }) => row.smart_list_id!);
  if (listIds.length === 0) return fields;
  const images = await imagesOfLists(deps.ctx.db, [...new Set(listIds)]);
  // Each list's URLs once, shared by the fields that use it.
  const urls = new Map(
    [...images].map(([listId, listed]) => [
      listId,
      Object.fromEntries(
        listed.map((o) => [
          o.value,
          `/f/${encodeURIComponent(viewKey)}/options/${o.optionId}/image?v=${imageVersion(o.key)}`,
        ]),
      ),
    ]),
  );
  return fields.map((f, i) => {
    const optionImages = urls.get(rows[i]!.row.smart_list_id ?? 0);
    return optionImages && CHOICES.has(f.type) ? { ...f, optionImages } : f;
  });
}

const CHOICES = new Set(['select', 'radio', 'checkbox']);

function emptyState(form: RenderedForm): Omit<RenderState, 'loadToken'> {
  return {
    values: new Map(form.fields.filter((f) => f.defaultValue !== null).map((f) => [f.id, f.defaultValue])),
    errors: new Map(),
    base: '',
  };
}

/**
 * This process's last read of the form behind a hosted URL, when it may still be trusted:
 * where the database has a change epoch (SQLite), nothing has been written since, so it is the
 * same form; otherwise (PostgreSQL), for views only (maxAgeMs), it was read within maxAgeMs.
 */
function keptRead(deps: HostedDeps, viewKey: string, maxAgeMs: number) {
  const seen = deps.recent.get(viewKey);
  if (!seen) return undefined;
  const epoch = changeEpoch(deps.ctx.db);
  if (epoch !== undefined) return seen.epoch === epoch ? seen : undefined;
  const now = deps.ctx.clock.now();
  return maxAgeMs > 0 && now - seen.at < maxAgeMs && now >= seen.at ? seen : undefined;
}

/** keptRead's form, when there is one (undefined: read it with pageForm). */
export function keptPageForm(deps: HostedDeps, viewKey: string, maxAgeMs: number): PageDefinition | undefined {
  return keptRead(deps, viewKey, maxAgeMs)?.def;
}

/**
 * The form behind a hosted URL: undefined for none; a deleted one too (its page says so).
 * On SQLite, as this process last read it while nothing has been written since (the change
 * epoch); on PostgreSQL, with maxAgeMs, as this process read it within that long, if it did.
 */
export async function pageForm(deps: HostedDeps, viewKey: string, maxAgeMs = 0): Promise<PageDefinition | undefined> {
  const seen = keptRead(deps, viewKey, maxAgeMs);
  if (seen) return seen.def;
  const now = deps.ctx.clock.now();
  // Read before the form is: a write in between moves it, and what is kept is not used again.
  const epoch = changeEpoch(deps.ctx.db);
  const form = await repo.findFormByViewKey(deps.ctx.db, viewKey);
  const def = form && (await definitionOf(deps, form));
  if (deps.recent.size >= 10_000) deps.recent.clear();
  deps.recent.set(viewKey, { at: now, epoch, def });
  return def;
}

export async function apiForm(
  deps: HostedDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
): Promise<PageDefinition> {
  const form = await formsRepo.findForm(deps.ctx.db, accountId, formId);
  if (!form) throw new NotFoundError('form_not_found');
  return definitionOf(deps, form);
}

export function newLoadToken(deps: HostedDeps, def: PageDefinition): string {
  return loadToken(deps.ctx.config.secretKey, def.form.id, deps.ctx.clock.now());
}

// Pages are cut from slabs of memory: Buffer.concat gives a page of this size (above Node's
// 4 KiB pool) an allocation of its own, a few percent of a view's CPU. A slab is never
// written twice; it is freed once the last page cut from it has been sent.
const SLAB_BYTES = 1 << 20;
let slab = Buffer.allocUnsafe(0);
let slabUsed = 0;

/** The page at the form's URL as most views get it: defaults only, a new token. */
export function plainDocument(deps: HostedDeps, def: PageDefinition): Buffer {
  const [head, tail] = def.document;
  const token = newLoadToken(deps, def);
  const size = head.length + token.length + tail.length;
  if (size > SLAB_BYTES / 4) return Buffer.concat([head, Buffer.from(token, 'latin1'), tail]);
  if (slabUsed + size > slab.length) {
    slab = Buffer.allocUnsafe(SLAB_BYTES);
    slabUsed = 0;
  }
  const page = slab.subarray(slabUsed, slabUsed + size);
  slabUsed += size;
  head.copy(page, 0);
  page.write(token, head.length, 'latin1');
  tail.copy(page, head.length + token.length);
  return page;
}

/** The form's HTML as the page shows it, with prefilled or resumed values when the URL carries them. */
export async function formHtml(
  deps: HostedDeps,
  def: PageDefinition,
  opts: { prefill?: string; resume?: string; base?: string },
): Promise<string> {
  // Embedded HTML is copied into other pages and kept: its script asks for a token when it runs.
  const token = opts.base ? '' : newLoadToken(deps, def);
  if (!opts.prefill && !opts.resume && !opts.base) return def.plain.replace(TOKEN_SLOT, token);
  const state: RenderState = { ...emptyState(def), loadToken: token, base: opts.base ?? '' };
  if (opts.prefill) {
    const values = await prefilled(deps, def, opts.prefill);
    if (values) for (const [id, v] of values) state.values.set(id, v);
    else state.formError = 'This prefilled link has expired, so the form starts empty.';
  }
  if (opts.resume) {
    const resumed = await resumePartial(deps.ctx, def.form, opts.resume);
    if (resumed) {
      for (const [id, v] of resumed.values) state.values.set(id, v);
      state.resumeToken = opts.resume;
    } else state.formError = 'This resume link has expired or was already used, so the form starts empty.';
  }
  return renderForm(def, state);
}

// Submitting.

export type SubmitOutcome =
  | { kind: 'done'; message: string; redirectUrl?: string }
  | { kind: 'invalid'; errors: Map<number, string>; formError?: string; values: Map<number, unknown> }
  | { kind: 'closed'; state: FormState };

export interface PageSubmit {
  fields: FieldInput[];
  loadToken: string;
  honeypot: string;
  resumeToken?: string;
  /** The portal session cookie sent with the submit, if any: ties the submission to its portal user. */
  portalSession?: string;
}

const TOKEN_LIFETIME_MS = 24 * 3_600_000;

/** The honeypot, the page's age and its signature: throws submission_refused or page_expired. */
export function screen(deps: HostedDeps, def: PageDefinition, input: Pick<PageSubmit, 'loadToken' | 'honeypot'>): void {
  const { ctx, counters } = deps;
  if (input.honeypot !== '') {
    counters.add(def.form.account_id, def.form.id, 'refused_honeypot');
    throw new BadRequestError('submission_refused');
  }
  // Embedded HTML sent without its script has no token: the page comes back, filled in, with one.
  if (input.loadToken === '')
    throw new BadRequestError('page_expired', 'Please check your answers and send the form again.');
  const at = loadedAt(ctx.config.secretKey, def.form.id, input.loadToken);
  const now = ctx.clock.now();
  if (at === undefined || at > now + 60_000 || now - at > TOKEN_LIFETIME_MS) throw new BadRequestError('page_expired');
  if (now - at < ctx.config.hosted.publicSubmitMinSeconds * 1000) {
    counters.add(def.form.account_id, def.form.id, 'refused_too_fast');
    throw new BadRequestError(
      'submission_refused',
      'This form was sent too quickly after it was opened. Please check your answers and send it again.',
    );
  }
}

/** The inputs of fields that logic shows, as the script leaves them: a plain post holds every field. */
function visibleInputs(def: PageDefinition, inputs: FieldInput[], now: number): FieldInput[] {
  const values = new Map<number, StoredValue>();
  const byId = new Map(def.fields.map((f) => [f.id, f]));
  for (const i of inputs) {
    const f = byId.get(i.id);
    if (!f) continue;
    if (f.type === 'file' || f.type === 'signature') {
      values.set(f.id, [{ fileKey: '', name: '', size: 0, contentType: '' }]);
      continue;
    }
    try {
      const v = readValue(f, i.value, now);
      if (v !== null) values.set(f.id, v);
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
    }
  }
  const visible = visibleFields(def.fields, values);
  return inputs.filter((i) => visible.has(i.id));
}

/** Which field each problem of a 400 is about: body.fields[i]… names the i-th input, body.fields(id=N) field N. */
function fieldErrors(def: PageDefinition, inputs: FieldInput[], details: ErrorDetail[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const d of details) {
    const byIndex = /^body\.fields\[(\d+)\]/.exec(d.property);
    const byId = /^body\.fields\(id=(\d+)\)/.exec(d.property);
    const id = byIndex ? inputs[Number(byIndex[1])]?.id : byId ? Number(byId[1]) : undefined;
    const field = def.fields.find((f) => f.id === id);
    if (field && !out.has(field.id)) out.set(field.id, fieldMessage(field, d.message));
  }
  return out;
}

/** What the inputs show again after a refused post: the values as they were sent. */
export function shownValues(def: PageDefinition, inputs: FieldInput[]): Map<number, unknown> {
  const out = new Map<number, unknown>();
  for (const i of inputs) {
    const v = i.value as Record<string, unknown> | unknown[] | string;
    if (typeof v === 'object' && v !== null && !Array.isArray(v) && Array.isArray(v.subvalues))
      out.set(
        i.id,
        // A script's post is any JSON (a null among subvalues, say), refused by the checks: read
        // as shown, never dereferenced blindly, or the refusal would become a 500.
        (v.subvalues as unknown[]).map((s) =>
          String(typeof s === 'object' && s !== null ? (s as { subvalue?: unknown }).subvalue : s),
        ),
      );
    else if (typeof v === 'object' && v !== null && !Array.isArray(v))
      out.set(
        i.id,
        Object.fromEntries(Object.entries(v).map(([k, x]) => [k, Array.isArray(x) ? x.join(', ') : String(x)])),
      );
    else out.set(i.id, v);
  }
  // Card numbers are never sent back to the page.
  for (const f of def.fields) if (f.type === 'creditcard') out.delete(f.id);
  return out;
}

export async function submitPage(
  deps: HostedDeps,
  def: PageDefinition,
  input: PageSubmit,
  meta: RequestMeta,
): Promise<SubmitOutcome> {
  const { ctx } = deps;
  const state = stateOf(def.form, def.settings);
  if (state !== 'open') return { kind: 'closed', state };
  const form = def.form;
  const fields = visibleInputs(def, input.fields, ctx.clock.now());
  const done = (): SubmitOutcome => {
    const settings = settingsOf(form);
    return {
      kind: 'done',
      message: settings.successMessage ?? 'Thank you! Your answers were received.',
      ...(settings.redirectUrl !== undefined && { redirectUrl: settings.redirectUrl }),
    };
  };
  try {
    await withIdempotencyKey(
      ctx,
      form.account_id,
      `page:${input.loadToken}`,
      () => requestHash(ctx.config.secretKey, 'POST', `/f/${form.view_key}`, fields),
      (save) =>
        createSubmission(
          deps.submissions,
          { accountId: form.account_id },
          { formId: form.id },
          { fields },
          meta,
          async (trx, submission) => {
            await save?.(trx, { status: 200, body: '{}' });
            if (input.resumeToken) await finishPartial(ctx, trx, form.id, input.resumeToken);
            await tieToPortalUser(trx, ctx.clock.now(), input.portalSession, form.id, submission.id);
          },
        ),
    );
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    if (error.code === 'form_inactive') return { kind: 'closed', state: 'inactive' };
    if (error.code === 'form_full') return { kind: 'closed', state: 'full' };
    // The same page sent again with other answers after it went through: it went through.
    if (error.code === 'idempotency_key_reused') return done();
    if (error.statusCode === 400 && error.details) {
      const errors = fieldErrors(def, fields, error.details);
      return {
        kind: 'invalid',
        errors,
        values: shownValues(def, input.fields),
        ...(errors.size === 0 && { formError: error.message }),
      };
    }
    throw error;
  }
  deps.counters.add(form.account_id, form.id, 'completions');
  // This process's next view shows the form as it is now (the submission may have filled it).
  deps.recent.delete(form.view_key);
  return done();
}

// Partial saves from the page.

export async function savePagePartial(
  deps: HostedDeps,
  def: PageDefinition,
  input: { fields: FieldInput[]; resumeToken?: string; resumeEmail?: string },
  meta: PartialMeta,
): Promise<{ resumeToken: string; resumeUrl: string; emailed?: true }> {
  const { ctx } = deps;
  const values = acceptedValues(def.fields, input.fields, ctx.clock.now());
  const link = (token: string) => `/f/${encodeURIComponent(def.form.view_key)}?resume=${encodeURIComponent(token)}`;
  const { resumeToken } = await transact(ctx.db, async (trx) => {
    const saved = await savePartial(ctx, trx, def.form, def.fields, values, input.resumeToken, meta);
    // In the save's transaction: the email goes if and only if the partial it links to is saved.
    if (input.resumeEmail !== undefined)
      await enqueueResumeLinkEmail(trx, ctx, {
        accountId: def.form.account_id,
        formId: def.form.id,
        partialSubmissionId: saved.id,
        to: input.resumeEmail,
        url: `${ctx.config.publicUrl}${link(saved.resumeToken)}`,
      });
    return saved;
  });
  deps.counters.add(def.form.account_id, def.form.id, 'partial_saves');
  return { resumeToken, resumeUrl: link(resumeToken), ...(input.resumeEmail !== undefined && { emailed: true }) };
}

// Prefill.

const NOT_PREFILLABLE = new Set(['file', 'signature', 'creditcard']);

/** POST /forms/{formId}/prefill: the values are checked as a submission's and kept behind a signed token. */
export async function createPrefill(
  deps: HostedDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
  inputs: { id: number | string; value: unknown }[],
): Promise<{ url: string; token: string; expires: string }> {
  const { ctx } = deps;
  const def = await apiForm(deps, { accountId }, { formId });
  const now = ctx.clock.now();
  const problems: ErrorDetail[] = [];
  const values: Record<string, StoredValue> = {};
  const seen = new Set<number>();
  inputs.forEach((input, i) => {
    const id = Number(input.id);
    const field = def.fields.find((f) => f.id === id);
    if (!field) {
      problems.push({ property: `body.fields[${i}].id`, message: `this form has no field ${id}` });
      return;
    }
    // As a submission refuses it: which of the two was meant is not ours to guess.
    if (seen.has(id)) {
      problems.push({ property: `body.fields[${i}].id`, message: `field ${id} is given twice` });
      return;
    }
    seen.add(id);
    if (isEmptyInput(input.value)) return;
    if (NOT_PREFILLABLE.has(field.type)) {
      problems.push({ property: `body.fields[${i}].id`, message: `a ${field.type} field cannot be prefilled` });
      return;
    }
    try {
      const value = readValue(field, input.value, now);
      if (value !== null) values[String(id)] = value;
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
      problems.push({ property: `body.fields[${i}].value`, message: `${field.label} (${id}): ${error.message}` });
    }
  });
  if (problems.length > 0)
    throw new BadRequestError('invalid_submission', `${problems[0]!.property}: ${problems[0]!.message}`, {
      details: problems,
    });
  const json = JSON.stringify(values);
  const expiresAt = now + ctx.config.hosted.prefillTtlDays * 86_400_000;
  const { token } = await transact(ctx.db, async (trx) => {
    // Whether to seal is read again under a share lock: encryption turned on since the form was
    // read (and its conversion's removal of clear values done) must not miss this row.
    const made = prefillToken(ctx.config.secretKey, await repo.isEncryptedNow(trx, def.form.id));
    const data = made.key === undefined ? json : sealPrefill(made.key, json, def.form.id, made.id);
    await repo.insertPrefill(trx, { id: made.id, accountId, formId, data, now, expiresAt });
    return made;
  });
  return {
    url: `${ctx.config.publicUrl}/f/${encodeURIComponent(def.form.view_key)}?prefill=${encodeURIComponent(token)}`,
    token,
    expires: new Date(expiresAt).toISOString(),
  };
}

async function prefilled(
  deps: HostedDeps,
  def: PageDefinition,
  token: string,
): Promise<Map<number, unknown> | undefined> {
  const named = prefillId(deps.ctx.config.secretKey, token);
  if (!named) return undefined;
  const row = await repo.findPrefill(deps.ctx.db, named.id, def.form.id, deps.ctx.clock.now());
  // A form encrypted since takes no values kept in the clear, which its conversion removes.
  const json = row && openPrefill(named.key, row.data, def.form.id, named.id, def.form.is_encrypted === 1);
  if (json === undefined) return undefined;
  return new Map(Object.entries(JSON.parse(json) as Record<string, unknown>).map(([k, v]) => [Number(k), v]));
}

// Statistics.

const YEAR_ZERO = Date.parse('0000-01-01T00:00:00Z');

export async function formStats(
  deps: HostedDeps,
  { accountId }: AccountScope,
  { formId }: FormRef,
  range: { from?: string; to?: string },
) {
  const { ctx } = deps;
  const form = await formsRepo.findForm(ctx.db, accountId, formId);
  if (!form) throw new NotFoundError('form_not_found');
  const today = new Date(ctx.clock.now()).toISOString().slice(0, 10);
  const to = range.to ?? today;
  // Thirty days back, but not before year 0: a year before it is written "-000001-", no date.
  const from =
    range.from ??
    new Date(Math.max(Date.parse(`${to}T00:00:00Z`) - 29 * 86_400_000, YEAR_ZERO)).toISOString().slice(0, 10);
  if (from > to)
    throw new BadRequestError('validation_failed', 'query.from: must not be after to', {
      details: [{ property: 'query.from', message: 'must not be after to' }],
    });
  await deps.counters.flush();
  const rows = await repo.dailyCounts(ctx.db, accountId, formId, from, to);
  const days = rows.map((r) => ({
    day: r.day,
    views: r.views,
    starts: r.starts,
    partialSaves: r.partial_saves,
    completions: r.completions,
    refused: {
      rateLimit: r.refused_rate_limit,
      honeypot: r.refused_honeypot,
      tooFast: r.refused_too_fast,
      tooLarge: r.refused_too_large,
    },
  }));
  const sum = (k: 'views' | 'starts' | 'partialSaves' | 'completions') => days.reduce((n, d) => n + d[k], 0);
  const totals = {
    views: sum('views'),
    starts: sum('starts'),
    partialSaves: sum('partialSaves'),
    completions: sum('completions'),
  };
  const refused = {
    rateLimit: days.reduce((n, d) => n + d.refused.rateLimit, 0),
    honeypot: days.reduce((n, d) => n + d.refused.honeypot, 0),
    tooFast: days.reduce((n, d) => n + d.refused.tooFast, 0),
    tooLarge: days.reduce((n, d) => n + d.refused.tooLarge, 0),
  };
  return {
    formId,
    from,
    to,
    totals: { ...totals, refused },
    // Of the people who started filling in the form, the share who sent it.
    completionRate: totals.starts === 0 ? null : Math.min(1, totals.completions / totals.starts),
    days,
  };
}

export type { PageField };
