import type { Readable } from 'node:stream';
import type { Updateable } from 'kysely';
import type { AppContext } from '../../context.js';
import { open, SealError } from '../../crypto/envelope.js';
import type { DocmergeIntegrationsTable, DocmergeRunRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { AppError, BadRequestError, ConflictError, NotFoundError, type ErrorDetail } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { ObjectNotFoundError } from '../../storage/types.js';
import { logicProblems, toSibling } from '../fields/definition.js';
import { listFields } from '../fields/repository.js';
import { reviseForm } from '../forms/repository.js';
import { requireForm } from '../forms/service.js';
import type { AccountScope, FormRef, SubmissionRef } from '../permissions/caller.js';
import { keysFor, parseData, requireSubmission, type SubmissionsDeps } from '../submissions/definitions.js';
import * as uploadsRepo from '../uploads/repository.js';
import { FILE_KEY_PATTERN } from '../uploads/rules.js';
import { resolveTag, type Mapping } from './data.js';
import { mergeFieldsOf, render } from './generate.js';
import { documentAad } from './keys.js';
import * as repo from './repository.js';
import type { IntegrationInfo } from './repository.js';
import {
  MAX_INTEGRATIONS_PER_FORM,
  MAX_TEMPLATE_BYTES,
  type Docmerge,
  type DocmergeCreate,
  type DocmergeRun,
  type DocmergeUpdate,
  type PreviewBody,
  type RunListQuery,
} from './schemas.js';
import { kindOf, patternTags, TemplateError, type TemplateKind } from './template.js';
import { mergeThread } from './threaded-merge.js';

export interface IntegrationRef extends FormRef {
  integrationId: number;
}

const DEFAULT_FILE_NAME = '{form_name} {submission_id}';

type FieldList = Awaited<ReturnType<typeof mergeFieldsOf>>;

export function toDocmerge(row: IntegrationInfo, fields: FieldList): Docmerge {
  const tags = JSON.parse(row.tags) as string[];
  const mapping = JSON.parse(row.mapping) as Mapping;
  const to = JSON.parse(row.email_to) as string[];
  return {
    id: row.id,
    formId: row.form_id,
    kind: 'docmerge',
    name: row.name,
    template: { kind: row.template_kind, filename: row.template_name, size: row.template_size },
    tags,
    // What each tag merges, as worked out now (labels may have changed since it was made).
    mapping: Object.fromEntries(
      tags.map((t) => {
        const target = resolveTag(t, fields, mapping);
        return [t, target && 'field' in target ? target.field : null];
      }),
    ),
    fileName: row.file_name,
    logic: row.logic === null ? null : (JSON.parse(row.logic) as Docmerge['logic']),
    email: to.length === 0 ? null : { to, ...(row.email_subject !== null && { subject: row.email_subject }) },
    active: row.active === 1,
    flatten: row.flatten === 1,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

function toRun(row: DocmergeRunRow): DocmergeRun {
  return {
    id: row.id,
    integrationId: row.integration_id,
    submissionId: row.submission_id,
    attempt: row.attempt,
    time: isoTime(row.attempted_at),
    durationMs: row.duration_ms,
    outcome: row.outcome,
    error: row.error,
    documentId: row.document_id,
    nextAttempt: row.next_attempt_at === null ? null : isoTime(row.next_attempt_at),
  };
}

function fail(problems: ErrorDetail[]): never {
  const first = problems[0]!;
  throw new BadRequestError('invalid_integration', `${first.property}: ${first.message}`, { details: problems });
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

interface Template {
  kind: TemplateKind;
  filename: string;
  bytes: Buffer;
  tags: string[];
}

/** The template's bytes, inline or from an upload of this form, read and checked; 400 naming body.template. */
async function readTemplate(
  ctx: AppContext,
  accountId: number,
  formId: number,
  input: NonNullable<DocmergeCreate['template']>,
): Promise<Template> {
  const bad = (property: string, message: string): never => fail([{ property: `body.template${property}`, message }]);
  if ((input.content === undefined) === (input.fileKey === undefined))
    bad('', 'give the template as content (base64) or as a fileKey, one of the two');
  let bytes: Buffer;
  if (input.content !== undefined) {
    const compact = input.content.replace(/\s+/g, '');
    if (!BASE64.test(compact)) bad('.content', 'is not valid base64');
    bytes = Buffer.from(compact, 'base64');
  } else {
    const key = input.fileKey!;
    const [upload] = FILE_KEY_PATTERN.test(key) ? await uploadsRepo.findUploads(ctx.db, accountId, [key]) : [];
    if (!upload || upload.form_id !== formId) bad('.fileKey', `is no upload of this form: ${key}`);
    if (upload!.state !== 'stored') bad('.fileKey', `${key} has not been uploaded, or a submission holds it`);
    if (upload!.sealed === 1) bad('.fileKey', `${key} is sealed (an encrypted form's upload) and cannot be read`);
    try {
      const object = await ctx.storage.get(upload!.storage_key);
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of object.stream as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_TEMPLATE_BYTES) bad('.fileKey', `is larger than ${MAX_TEMPLATE_BYTES} bytes`);
        chunks.push(chunk);
      }
      bytes = Buffer.concat(chunks);
    } catch (error) {
      if (error instanceof ObjectNotFoundError) bad('.fileKey', `${key} has not been uploaded`);
      throw error;
    }
  }
  if (bytes.length === 0) bad('', 'is empty');
  if (bytes.length > MAX_TEMPLATE_BYTES) bad('', `is larger than ${MAX_TEMPLATE_BYTES} bytes`);
  const kind: TemplateKind = input.filename.toLowerCase().endsWith('.pdf') ? 'pdf' : 'docx';
  const actual = kindOf(bytes);
  if (actual !== kind)
    bad(
      '',
      `${input.filename} is not a ${kind.toUpperCase()} file${actual ? ` (it is a ${actual.toUpperCase()})` : ''}`,
    );
  try {
    return { kind, filename: input.filename, bytes, tags: await mergeThread.templateTags(kind, bytes) };
  } catch (error) {
    if (error instanceof TemplateError) bad('', `${input.filename} ${error.message}`);
    throw error;
  }
}

interface Effective {
  name: string;
  template?: Template;
  tags: string[];
  mapping: Mapping;
  fileName: string;
  logic: DocmergeCreate['logic'];
  email: DocmergeCreate['email'];
}

/**
 * Checks an integration against its form's fields: every tag of the template, the file name
 * and the subject names a field (mapped, or by label or id) or a built-in tag; every mapping
 * names a tag of them and a field of this form; the logic checks fields of this form. 400
 * naming each problem.
 */
async function check(ctx: AppContext, accountId: number, formId: number, e: Effective): Promise<FieldList> {
  const fieldRows = await listFields(ctx.db, accountId, formId);
  const fields = await mergeFieldsOf(ctx, accountId, formId);
  const fieldIds = new Set(fields.map((f) => f.id));
  const problems: ErrorDetail[] = [];
  const subjectTags = e.email?.subject === undefined ? [] : patternTags(e.email.subject);
  const allTags = new Set([...e.tags, ...patternTags(e.fileName), ...subjectTags]);
  for (const [tag, fieldId] of Object.entries(e.mapping)) {
    if (!allTags.has(tag))
      problems.push({
        property: `body.mapping.${tag}`,
        message: 'is no tag of the template, the file name or the subject',
      });
    else if (fieldId !== null && !fieldIds.has(fieldId))
      problems.push({ property: `body.mapping.${tag}`, message: `must be a field of this form; ${fieldId} is not` });
  }
  const unnamed = (tags: string[], property: string, where: string) => {
    for (const tag of new Set(tags))
      if (!resolveTag(tag, fields, e.mapping))
        problems.push({
          property,
          message: `${where} "${tag}" names no field of this form (map it in mapping, or name it after a field's label or id)`,
        });
  };
  unnamed(e.tags, 'body.template', e.template?.kind === 'pdf' ? 'the PDF field' : 'the tag');
  unnamed(patternTags(e.fileName), 'body.fileName', 'the tag');
  unnamed(subjectTags, 'body.email.subject', 'the tag');
  if (e.logic) {
    const siblings = new Map(fieldRows.map((f) => [f.id, toSibling(f)]));
    problems.push(...logicProblems(e.logic, 'body', siblings, undefined));
  }
  if (problems.length > 0) fail(problems);
  return fields;
}

async function requireIntegration(db: Executor, scope: AccountScope, ref: IntegrationRef): Promise<IntegrationInfo> {
  await requireForm(db, scope, ref);
  const row = await repo.findIntegration(db, scope.accountId, ref.formId, ref.integrationId);
  if (!row) throw new NotFoundError('integration_not_found');
  return row;
}

export async function listIntegrations(
  ctx: AppContext,
  scope: AccountScope,
  { formId }: FormRef,
): Promise<Page & { integrations: Docmerge[] }> {
  await requireForm(ctx.db, scope, { formId });
  const fields = await mergeFieldsOf(ctx, scope.accountId, formId);
  const integrations = (await repo.listIntegrations(ctx.db, scope.accountId, formId)).map((r) => toDocmerge(r, fields));
  return { integrations, ...page(integrations.length, 1, MAX_INTEGRATIONS_PER_FORM) };
}

export async function getIntegration(ctx: AppContext, scope: AccountScope, ref: IntegrationRef): Promise<Docmerge> {
  const row = await requireIntegration(ctx.db, scope, ref);
  return toDocmerge(row, await mergeFieldsOf(ctx, scope.accountId, ref.formId));
}

export async function createIntegration(
  ctx: AppContext,
  scope: AccountScope,
  { formId }: FormRef,
  input: DocmergeCreate,
): Promise<Docmerge> {
  const { accountId } = scope;
  await requireForm(ctx.db, scope, { formId });
  const template = await readTemplate(ctx, accountId, formId, input.template);
  const e: Effective = {
    name: input.name ?? template.filename,
    template,
    tags: template.tags,
    mapping: input.mapping ?? {},
    fileName: input.fileName ?? DEFAULT_FILE_NAME,
    logic: input.logic ?? null,
    email: input.email ?? null,
  };
  const fields = await check(ctx, accountId, formId, e);
  return transact(ctx.db, async (trx) => {
    await requireForm(trx, scope, { formId });
    if ((await repo.countIntegrations(trx, formId)) >= MAX_INTEGRATIONS_PER_FORM)
      throw new BadRequestError(
        'too_many_integrations',
        `A form holds at most ${MAX_INTEGRATIONS_PER_FORM} document-merge integrations`,
      );
    const now = ctx.clock.now();
    const row = await repo.insertIntegration(trx, {
      account_id: accountId,
      form_id: formId,
      name: e.name,
      template_kind: template.kind,
      template_name: template.filename,
      template: template.bytes.toString('base64'),
      template_size: template.bytes.length,
      tags: JSON.stringify(template.tags),
      mapping: JSON.stringify(e.mapping),
      file_name: e.fileName,
      logic: e.logic ? JSON.stringify(e.logic) : null,
      email_to: JSON.stringify(e.email?.to ?? []),
      email_subject: e.email?.subject ?? null,
      active: input.active === false ? 0 : 1,
      flatten: input.flatten === false ? 0 : 1,
      created_at: now,
      updated_at: now,
    });
    // New submissions read the form's integrations with its definition, under its revision.
    await reviseForm(trx, accountId, formId);
    return toDocmerge(row, fields);
  });
}

export async function updateIntegration(
  ctx: AppContext,
  scope: AccountScope,
  ref: IntegrationRef,
  input: DocmergeUpdate,
): Promise<Docmerge> {
  const { accountId } = scope;
  const current = await requireIntegration(ctx.db, scope, ref);
  const template = input.template && (await readTemplate(ctx, accountId, ref.formId, input.template));
  const currentTo = JSON.parse(current.email_to) as string[];
  const e: Effective = {
    name: input.name ?? current.name,
    template: template ?? { kind: current.template_kind, filename: '', bytes: Buffer.alloc(0), tags: [] },
    tags: template?.tags ?? (JSON.parse(current.tags) as string[]),
    mapping: input.mapping ?? (JSON.parse(current.mapping) as Mapping),
    fileName: input.fileName ?? current.file_name,
    logic: input.logic !== undefined ? input.logic : current.logic === null ? null : JSON.parse(current.logic),
    email:
      input.email !== undefined
        ? input.email
        : currentTo.length === 0
          ? null
          : { to: currentTo, ...(current.email_subject !== null && { subject: current.email_subject }) },
  };
  // A new template keeps the mapping only where its tags still are.
  if (template && input.mapping === undefined) {
    const names = new Set([...template.tags, ...patternTags(e.fileName), ...patternTags(e.email?.subject ?? '')]);
    e.mapping = Object.fromEntries(Object.entries(e.mapping).filter(([tag]) => names.has(tag)));
  }
  const fields = await check(ctx, accountId, ref.formId, e);
  const update: Updateable<DocmergeIntegrationsTable> = {
    name: e.name,
    mapping: JSON.stringify(e.mapping),
    file_name: e.fileName,
    logic: e.logic ? JSON.stringify(e.logic) : null,
    email_to: JSON.stringify(e.email?.to ?? []),
    email_subject: e.email?.subject ?? null,
    updated_at: ctx.clock.now(),
  };
  if (template)
    Object.assign(update, {
      template_kind: template.kind,
      template_name: template.filename,
      template: template.bytes.toString('base64'),
      template_size: template.bytes.length,
      tags: JSON.stringify(template.tags),
    });
  if (input.active !== undefined) update.active = input.active ? 1 : 0;
  if (input.flatten !== undefined) update.flatten = input.flatten ? 1 : 0;
  return transact(ctx.db, async (trx) => {
    await requireIntegration(trx, scope, ref);
    const row = await repo.updateIntegration(trx, ref.integrationId, update);
    await reviseForm(trx, accountId, ref.formId);
    return toDocmerge(row, fields);
  });
}

export async function deleteIntegration(
  ctx: AppContext,
  scope: AccountScope,
  ref: IntegrationRef,
): Promise<{ id: number; deleted: true }> {
  return transact(ctx.db, async (trx) => {
    await requireIntegration(trx, scope, ref);
    await repo.deleteIntegration(trx, ref.integrationId);
    await reviseForm(trx, scope.accountId, ref.formId);
    return { id: ref.integrationId, deleted: true as const };
  });
}

export async function listRuns(
  ctx: AppContext,
  scope: AccountScope,
  ref: IntegrationRef,
  query: RunListQuery,
): Promise<Page & { runs: DocmergeRun[] }> {
  await requireIntegration(ctx.db, scope, ref);
  const { rows, total } = await repo.listRuns(
    ctx.db,
    ref.integrationId,
    query.pageSize,
    (query.pageNumber - 1) * query.pageSize,
  );
  return { runs: rows.map(toRun), ...page(total, query.pageNumber, query.pageSize) };
}

export interface DocumentDownload {
  filename: string;
  contentType: string;
  size: number;
  stream: Readable | Buffer;
}

/**
 * The integration's template merged with one submission of its form, made now and not kept
 * (conditions are not judged: a preview shows what the document would be). An encrypted
 * form's submission needs the password.
 */
export async function previewIntegration(
  deps: SubmissionsDeps,
  scope: AccountScope,
  ref: IntegrationRef,
  body: PreviewBody,
  password: string | undefined,
): Promise<DocumentDownload> {
  const { ctx } = deps;
  const info = await requireIntegration(ctx.db, scope, ref);
  let integration = (await repo.findIntegrationWithTemplate(ctx.db, ref.integrationId))!;
  if (body.template) {
    const template = await readTemplate(ctx, scope.accountId, ref.formId, body.template);
    const to = JSON.parse(info.email_to) as string[];
    // The mapping of the tags the replacement still has, as a PUT with it would keep.
    const names = new Set([...template.tags, ...patternTags(info.file_name), ...patternTags(info.email_subject ?? '')]);
    const mapping = Object.fromEntries(
      Object.entries(JSON.parse(info.mapping) as Mapping).filter(([tag]) => names.has(tag)),
    );
    await check(ctx, scope.accountId, ref.formId, {
      name: info.name,
      template,
      tags: template.tags,
      mapping,
      fileName: info.file_name,
      logic: null,
      email: to.length === 0 ? null : { to, ...(info.email_subject !== null && { subject: info.email_subject }) },
    });
    integration = {
      ...integration,
      template_kind: template.kind,
      template_name: template.filename,
      template: template.bytes.toString('base64'),
      tags: JSON.stringify(template.tags),
      mapping: JSON.stringify(mapping),
    };
  }
  const { row, def } = await requireSubmission(deps, scope, { submissionId: body.submissionId });
  if (row.form_id !== ref.formId) throw new NotFoundError('submission_not_found');
  const values = parseData(def, row, await keysFor(deps, def, password));
  const fields = await mergeFieldsOf(ctx, scope.accountId, ref.formId);
  let rendered;
  try {
    rendered = await render(
      integration,
      def.form,
      fields,
      { id: row.id, timestamp: isoTime(row.created_at), values },
      { judge: false },
    );
  } catch (error) {
    if (error instanceof TemplateError)
      throw new BadRequestError('invalid_integration', `The template ${error.message}`, {
        details: [{ property: 'template', message: error.message }],
      });
    throw error;
  }
  const { bytes, fileName, contentType } = rendered!;
  return { filename: fileName, contentType, size: bytes.length, stream: bytes };
}

/** A made document's bytes; a sealed one (encrypted form) is opened with the password as it streams. */
export async function openDocument(
  deps: SubmissionsDeps,
  scope: AccountScope,
  { submissionId }: SubmissionRef,
  documentId: number,
  password: string | undefined,
): Promise<DocumentDownload> {
  const { ctx } = deps;
  const { def } = await requireSubmission(deps, scope, { submissionId });
  const document = await repo.findDocument(ctx.db, scope.accountId, submissionId, documentId);
  if (!document) throw new NotFoundError('document_not_found');
  const keys =
    document.sealed === 1 || def.form.encryption_key !== null ? await keysFor(deps, def, password) : undefined;
  if (document.sealed === 1 && !keys) throw new ConflictError('file_sealed');
  try {
    const object = await ctx.storage.get(document.storage_key);
    const base = { filename: document.file_name, contentType: document.content_type };
    if (document.sealed === 0) return { ...base, size: object.size, stream: object.stream };
    // Opened whole, so that nothing is sent before the seal is verified (documents are small).
    const chunks: Buffer[] = [];
    for await (const chunk of object.stream as AsyncIterable<Buffer>) chunks.push(chunk);
    const opened = open(Buffer.concat(chunks), keys!, documentAad(document.storage_key));
    return { ...base, size: opened.length, stream: opened };
  } catch (error) {
    if (error instanceof ObjectNotFoundError)
      throw new NotFoundError('document_not_found', undefined, { cause: error });
    if (error instanceof SealError) throw new AppError('submission_integrity_failed', undefined, { cause: error });
    throw error;
  }
}
