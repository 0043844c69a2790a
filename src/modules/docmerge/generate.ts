import { Readable } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { AppContext } from '../../context.js';
import { seal } from '../../crypto/envelope.js';
import type { Insertable } from 'kysely';
import type { DocmergeDocumentsTable, DocmergeIntegrationRow, FormRow } from '../../db/schema.js';
import type { RetrySchedule } from '../../jobs/kind.js';
import { enqueue } from '../../jobs/outbox.js';
import { RetryAt, scheduledDelay } from '../../jobs/retry.js';
import type { JobInfo, JobTools } from '../../jobs/types.js';
import { sealingKeyOf } from '../encryption/keys.js';
import { toDefinition } from '../fields/definition.js';
import type { FieldLogic } from '../fields/schemas.js';
import * as fieldsRepo from '../fields/repository.js';
import * as formsRepo from '../forms/repository.js';
import * as submissionsRepo from '../submissions/repository.js';
import { isSealed } from '../submissions/sealing.js';
import { logicHolds, type FieldForValues, type StoredValue } from '../submissions/values.js';
import { BUILT_IN_TAGS, mergeDataFor, type Mapping } from './data.js';
import { fieldsForMerge } from './merge-input.js';
import { removeFilesJob } from '../uploads/jobs.js';
import { lockSubmission } from '../submissions/repository.js';
import { emailDocumentJob } from './email.js';
import type { EmailPayload, GeneratePayload } from './payload.js';
import { unwrapValues } from './payload.js';
import { documentAad, documentStorageKey } from './keys.js';
import * as repo from './repository.js';
import { CONTENT_TYPES, fileNameOf, fillPattern, patternTags, type TemplateKind } from './template.js';
import { mergeThread } from './threaded-merge.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;

/** After a failure: about 10 s, 1 min, 10 min, 1 h, 6 h (±10 %): 6 attempts over about 7 hours. */
export const RETRY_SCHEDULE: RetrySchedule = {
  delaysMs: [10 * SECOND, MINUTE, 10 * MINUTE, 60 * MINUTE, 360 * MINUTE],
  jitter: 0.1,
};
export const MAX_ATTEMPTS = RETRY_SCHEDULE.delaysMs.length + 1;

const MAX_ERROR_LENGTH = 500;

/** The fields of a form as merging reads them. */
export async function mergeFieldsOf(ctx: Pick<AppContext, 'db'>, accountId: number, formId: number) {
  const rows = await fieldsRepo.listFields(ctx.db, accountId, formId);
  return rows.map((r): FieldForValues => ({ id: r.id, ...toDefinition(r) }));
}

export interface Rendered {
  bytes: Buffer;
  fileName: string;
  contentType: string;
  kind: TemplateKind;
  /** The email subject, with only built-in tags filled when the form is encrypted. */
  subject: string;
}

/** The integration's template with one submission's values; null when its conditions do not hold. */
export async function render(
  integration: DocmergeIntegrationRow,
  form: Pick<FormRow, 'id' | 'name' | 'is_encrypted'>,
  fields: FieldForValues[],
  submission: { id: number; timestamp: string; values: ReadonlyMap<number, StoredValue> },
  options: { judge: boolean },
): Promise<Rendered | null> {
  if (options.judge && integration.logic !== null) {
    const logic = JSON.parse(integration.logic) as FieldLogic;
    const byId = new Map(fields.map((f) => [f.id, f]));
    if (logicHolds(logic, byId, (id) => submission.values.get(id)) !== (logic.action === 'show')) return null;
  }
  const kind = integration.template_kind;
  const subjectPattern = integration.email_subject ?? `${integration.name}: {form_name} {submission_id}`;
  const patterns = [...patternTags(integration.file_name), ...patternTags(subjectPattern)];
  const tags = [...(JSON.parse(integration.tags) as string[]), ...patterns];
  const mapping = JSON.parse(integration.mapping) as Mapping;
  const subject = {
    submissionId: submission.id,
    formId: form.id,
    formName: form.name,
    timestamp: submission.timestamp,
    values: submission.values,
  };
  // Off the event loop (threaded-merge.ts): the thread works the values out from the same data.
  const bytes = await mergeThread.merge({
    kind,
    template: Buffer.from(integration.template, 'base64'),
    flatten: integration.flatten === 1,
    tags,
    fields: fieldsForMerge(fields),
    mapping,
    subject,
  });
  // Here, only what the file name and subject merge.
  const data = mergeDataFor(patterns, fields, mapping, subject);
  // An encrypted form's subject goes into the mail log and the job's payload: no values in it.
  const subjectData =
    form.is_encrypted === 1 ? mergeDataFor([...BUILT_IN_TAGS], fields, {}, { ...subject, values: new Map() }) : data;
  return {
    bytes,
    // Likewise its file name, which is kept in the clear with the document's row.
    fileName: fileNameOf(integration.file_name, form.is_encrypted === 1 ? subjectData : data, kind),
    contentType: CONTENT_TYPES[kind],
    kind,
    subject: fillPattern(subjectPattern, subjectData).slice(0, 300),
  };
}

function message(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH)}…` : text;
}

/** A document written to storage, to record (with its email) when the run ends. */
interface Made {
  outcome: 'made';
  row: Insertable<DocmergeDocumentsTable>;
  email: Omit<EmailPayload, 'documentId'> | undefined;
}

const SUBMISSION_GONE = 'the submission or its form was deleted';

type Outcome = Made | { outcome: 'exists'; documentId: number } | { outcome: 'skipped'; why: string };

/**
 * One run of docmerge.generate: reads the integration, the form and the submission's values,
 * judges the conditions, merges, keeps the document (sealed to the form's key when the form
 * is encrypted) under its one storage key, and records it in the transaction that ends the run
 * (tools.atEnd), with the email job, the run log and, for an encrypted form, the payload
 * without its values. A run that finds the document made (an earlier run's worker died before
 * the job was marked done) does nothing more; a run killed after the object was written and
 * before the row was writes the same object again. Each run leaves a row in the run log.
 */
export async function generateDocument(
  ctx: AppContext,
  job: JobInfo<GeneratePayload>,
  tools: JobTools<GeneratePayload>,
): Promise<void> {
  const p = job.payload;
  const integration = await repo.findIntegrationWithTemplate(ctx.db, p.integrationId);
  if (!integration) return; // deleted since: its run log went with it

  const attemptedAt = ctx.clock.now();
  const started = performance.now();
  let result: Outcome | undefined;
  let error: string | undefined;
  try {
    result = await attempt(ctx, integration, p);
  } catch (cause) {
    error = message(cause);
  }
  const durationMs = Math.round(performance.now() - started);
  const log = {
    integration_id: integration.id,
    job_id: job.id,
    submission_id: p.submissionId,
    attempt: job.attempt,
    attempted_at: attemptedAt,
    duration_ms: durationMs,
  };
  if (result) {
    const done = result;
    // One write at the end of the run (with the ends of other runs): the document's row, its email
    // job, the run log and, for an encrypted form, the payload without its values.
    tools.atEnd(async (trx) => {
      let outcome = done.outcome;
      let documentId: number | null = done.outcome === 'exists' ? done.documentId : null;
      let why = done.outcome === 'skipped' ? done.why : null;
      if (done.outcome === 'made' && !(await lockSubmission(trx, done.row.submission_id))) {
        // Deleted while its document was made: no row to keep it by, so its object goes too
        // (the delete's removal of its documents' objects did not see it).
        outcome = 'skipped';
        why = SUBMISSION_GONE;
        await enqueue(trx, removeFilesJob, { keys: [done.row.storage_key] });
      } else if (done.outcome === 'made') {
        const document = await repo.insertDocument(trx, done.row);
        if (document) {
          documentId = document.id;
          if (done.email) await enqueue(trx, emailDocumentJob, { ...done.email, documentId: document.id });
        } else {
          // Another run made it meanwhile: its object is the one just written again, the same document,
          // unless a conversion has moved it since (encryption turned on or off): then this copy goes.
          outcome = 'exists';
          const existing = (await repo.findDocumentOf(trx, done.row.submission_id, done.row.integration_id))!;
          documentId = existing.id;
          if (existing.storage_key !== done.row.storage_key)
            await enqueue(trx, removeFilesJob, { keys: [done.row.storage_key] });
        }
      }
      await repo.insertRun(trx, {
        ...log,
        outcome,
        error: why,
        document_id: documentId,
        next_attempt_at: null,
      });
      if (p.values !== undefined) await tools.replacePayload({ ...p, values: undefined }, trx);
    });
    return;
  }
  const last = job.attempt >= MAX_ATTEMPTS;
  const nextAt = last ? null : attemptedAt + durationMs + scheduledDelay(job.attempt, RETRY_SCHEDULE);
  tools.atEnd(async (trx) => {
    await repo.insertRun(trx, { ...log, outcome: 'failed', error: error!, document_id: null, next_attempt_at: nextAt });
    if (last && p.values !== undefined) await tools.replacePayload({ ...p, values: undefined }, trx);
  });
  // The time the log shows is the time the worker retries at.
  if (nextAt === null) throw new Error(error);
  throw new RetryAt(error!, nextAt);
}

async function attempt(ctx: AppContext, integration: DocmergeIntegrationRow, p: GeneratePayload): Promise<Outcome> {
  const existing = await repo.findDocumentOf(ctx.db, p.submissionId, integration.id);
  if (existing) return { outcome: 'exists', documentId: existing.id };
  const [form, row] = await Promise.all([
    formsRepo.findForm(ctx.db, p.accountId, p.formId),
    submissionsRepo.findSubmission(ctx.db, p.accountId, p.submissionId),
  ]);
  if (!form || !row) return { outcome: 'skipped', why: SUBMISSION_GONE };

  let values: Map<number, StoredValue>;
  if (isSealed(row.data)) {
    if (p.values === undefined)
      return { outcome: 'skipped', why: 'the submission is sealed and the job holds no copy of its values' };
    values = unwrapValues(ctx.config.secretKey, p.submissionId, p.values);
  } else {
    values = new Map(
      Object.entries(JSON.parse(row.data) as Record<string, StoredValue>).map(([k, v]) => [Number(k), v]),
    );
  }
  const fields = await mergeFieldsOf(ctx, p.accountId, p.formId);
  const rendered = await render(
    integration,
    form,
    fields,
    { id: row.id, timestamp: new Date(row.created_at).toISOString(), values },
    { judge: true },
  );
  if (!rendered) return { outcome: 'skipped', why: 'the conditions did not hold' };

  const storageKey = documentStorageKey(integration, row.id, rendered.kind);
  const publicKey = sealingKeyOf(form);
  const stored = publicKey ? seal(rendered.bytes, publicKey, documentAad(storageKey)) : rendered.bytes;
  await ctx.storage.put(storageKey, Readable.from([stored]), {
    maxBytes: stored.length,
    contentType: publicKey ? 'application/octet-stream' : rendered.contentType,
  });
  const to = JSON.parse(integration.email_to) as string[];
  return {
    outcome: 'made',
    row: {
      account_id: p.accountId,
      form_id: p.formId,
      submission_id: row.id,
      integration_id: integration.id,
      file_name: rendered.fileName,
      content_type: rendered.contentType,
      size: rendered.bytes.length,
      storage_key: storageKey,
      sealed: publicKey ? 1 : 0,
      created_at: ctx.clock.now(),
    },
    email:
      to.length === 0
        ? undefined
        : { accountId: p.accountId, formId: p.formId, submissionId: row.id, to, subject: rendered.subject },
  };
}
