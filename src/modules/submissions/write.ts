import type { Transaction } from 'kysely';
import { AppError, ConflictError, NotFoundError } from '../../errors.js';
import { countOfForm, holdCountOfForm, noteSubmissionChange } from '../forms/counts.js';
import * as uploadsRepo from '../uploads/repository.js';
import { enqueue, jobRowsOf, wakeWorkers } from '../../jobs/outbox.js';
import { withHeldRequestId } from '../../request-context.js';
import type { Database, SubmissionRow } from '../../db/schema.js';
import { removeFilesJob } from '../uploads/jobs.js';
import { removeAfterUrlExpiry } from '../uploads/service.js';
import { commitFiles, discardFiles, resolveFiles, storeFiles } from './files.js';
import {
  isQuiet,
  loadEventConfig,
  publishSubmissionEvent,
  submissionEventJobs,
  type SubmissionEvent,
} from '../events/publish.js';
import { documentKeysOf } from '../docmerge/repository.js';
import * as repo from './repository.js';
import { requestHash, withIdempotencyKey, type IdempotentOutcome } from '../idempotency/service.js';
import { isSealed } from './sealing.js';
import type { Submission, SubmissionCreate, SubmissionUpdate } from './schemas.js';
import {
  type DataMap,
  type FormDefinition,
  type SubmissionsDeps,
  keptDefinition,
  keysFor,
  loadDefinition,
  parseData,
  requireSubmission,
} from './definitions.js';
import { failIfTaken, heldOtherWay, prepareSubmission } from './indexing.js';
import { toSubmission } from './presentation.js';
import type { AccountScope, FormRef, SubmissionRef } from '../permissions/caller.js';

/** What a create keeps of the request that makes it (requestMetaOf makes it from one). */
export interface RequestMeta {
  userAgent: string;
  remoteAddr: string;
  /**
   * The request's x-request-id, which the create's jobs carry. Given here because the create
   * routes run outside the request-id context (requestIdPassed, src/http/observability.ts):
   * createOnce enters it only where it enqueues the usual way.
   */
  requestId: string;
}

/**
 * Runs inside the creating transaction, after the insert: how idempotency records its response
 * atomically. replay is what may be kept for a replay: for an encrypted form, the record without
 * its values, since the service keeps no plaintext copy of them.
 */
export type OnCreated = (trx: Transaction<Database>, replay: Submission) => Promise<void>;

class StaleDefinition extends Error {}

/**
 * Notes the change in the form's counts and checks that the form is still at the revision the
 * values were checked and stored against. A form changed meanwhile (a field edited, encryption
 * turned on or off) fails the write, which is then made again against the new definition.
 * The last statement of the write: the count's slot and the form's share lock are then held
 * only until the commit that follows.
 */
async function noteChange(
  trx: Transaction<Database>,
  def: FormDefinition,
  accountId: number,
  delta: number,
  createdAt: number,
): Promise<void> {
  const revision = await noteSubmissionChange(trx, accountId, def.formId, delta, createdAt);
  if (revision !== def.form.revision) throw new StaleDefinition();
}

/**
 * An edit's row no longer holds what the edit read and merged into: another edit committed
 * meanwhile. The edit is read, merged and written again on top of it.
 */
class StaleRow extends Error {}

/**
 * How many times an edit is merged again into a row that other edits keep changing. Each
 * miss means another edit of the row committed, so with n edits of one submission at once
 * every one lands within n tries.
 */
const EDIT_TRIES = 10;

async function againIfStale<T>(attempt: () => Promise<T>): Promise<T> {
  let staleDefinitions = 0;
  let staleRows = 0;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (error instanceof StaleDefinition) {
        if (++staleDefinitions === 3) throw new ConflictError('form_changed');
      } else if (error instanceof StaleRow) {
        if (++staleRows === EDIT_TRIES)
          throw new ConflictError(
            'form_changed',
            'The submission kept changing while this edit was written; send it again',
          );
      } else throw error;
    }
  }
}

/**
 * A create as the API takes it: under an Idempotency-Key when one is sent (the first answer
 * replayed, see withIdempotencyKey), else as it comes. The route's and the early create's.
 */
export function createWithKey(
  deps: SubmissionsDeps,
  scope: AccountScope,
  formId: number,
  input: SubmissionCreate,
  meta: RequestMeta,
  request: { key: string | undefined; url: string },
  /** For a token as last read (see createSubmission): only without a key. */
  check?: repo.TokenCheck,
): Promise<IdempotentOutcome<Submission>> {
  return withIdempotencyKey(
    deps.ctx,
    scope.accountId,
    request.key,
    () => requestHash(deps.ctx.config.secretKey, 'POST', request.url, input),
    (save) =>
      createSubmission(
        deps,
        scope,
        { formId },
        input,
        meta,
        save && ((trx, submission) => save(trx, { status: 200, body: JSON.stringify(submission) })),
        check,
      ),
  );
}

/**
 * Creates a submission; made again against the new definition if the form changed meanwhile.
 *
 * The first attempt uses the definition this process kept for the form without reading the
 * form's revision first (on SQLite that read, outside any transaction, costs about as much as
 * the row's insert; on PostgreSQL it is a round trip). The transaction checks the revision
 * anyway, so a kept definition that is out of date is caught there, and so is a form deleted
 * since (its deletion moves the revision). Whatever such an attempt is refused with before
 * that check passed (values refused by the old fields, form_inactive, form_full,
 * StaleDefinition) may be the old definition's doing: the create is then made again against
 * the definition read now, which gives the answer; a failure that is no refusal is the
 * answer. Its storage writes and its transaction are undone first, and it removes no upload
 * over a size limit (which the definition read now may have raised).
 *
 * With a check, scope is a token's owner as last read (repo.TokenCheck): until a statement of
 * the create's has found the token live, the create goes only as far as that statement, with
 * a kept definition, and shows no refusal (a token that is not live may see nothing); it then
 * throws repo.TokenUnconfirmed having written nothing, and the caller looks the token up and
 * makes the create again. Once found live, the create goes on as any other.
 */
export async function createSubmission(
  deps: SubmissionsDeps,
  scope: AccountScope,
  ref: FormRef,
  input: SubmissionCreate,
  meta: RequestMeta,
  onCreated?: OnCreated,
  check?: repo.TokenCheck,
): Promise<Submission> {
  const kept = keptDefinition(deps, scope, ref);
  if (check && !kept) throw new repo.TokenUnconfirmed();
  if (kept) {
    const attempt = { def: kept, read: false, checked: false };
    try {
      return await createOnce(deps, attempt, scope, input, meta, onCreated, check);
    } catch (error) {
      // Only a refusal can be the old definition's doing. Anything else (a database out of
      // reach, a connection lost maybe after the commit) is the answer: made again, a create
      // that went in would go in twice.
      const refusal = error instanceof AppError && error.statusCode < 500;
      if (check && !check.confirmed && (refusal || error instanceof StaleDefinition)) throw new repo.TokenUnconfirmed();
      if (!(error instanceof StaleDefinition) && (attempt.checked || !refusal)) throw error;
    }
  }
  return againIfStale(async () =>
    createOnce(
      deps,
      { def: await loadDefinition(deps, scope, ref), read: true, checked: false },
      scope,
      input,
      meta,
      onCreated,
    ),
  );
}

async function createOnce(
  deps: SubmissionsDeps,
  /**
   * read: def is at the revision read for this attempt (else kept, and maybe out of date);
   * checked turns true once the transaction has found the form at def's revision.
   */
  attempt: { def: FormDefinition; read: boolean; checked: boolean },
  { accountId }: AccountScope,
  input: SubmissionCreate,
  meta: RequestMeta,
  onCreated?: OnCreated,
  check?: repo.TokenCheck,
): Promise<Submission> {
  const { def } = attempt;
  const formId = def.formId;
  if (def.form.inactive === 1) throw new ConflictError('form_inactive');
  const limit = def.submissionLimit;
  const full = () => new ConflictError('form_full', `This form has reached its limit of ${limit} submissions`);
  const { ctx } = deps;
  // Spares the work of a create that cannot go in; the exact check is in the transaction.
  if (limit !== undefined && (await countOfForm(ctx.db, formId)) >= limit) throw full();

  // A kept definition's size limits may be out of date: an object over them stays for the
  // attempt that follows, against the definition read then.
  const files = await resolveFiles(ctx, def, accountId, input.fields, undefined, { removeOversized: attempt.read });
  const data: DataMap = new Map();
  const write = prepareSubmission(def, files.inputs, data, ctx.clock.now());

  // A create that writes nothing but its row, values, index, counts and the outbox rows of
  // its events is one statement where the database can make it one (PostgreSQL): run alone,
  // without BEGIN and COMMIT around it, and shared with the creates that arrive meanwhile.
  // On SQLite the create thread writes it. It writes nothing unless it can write all; the
  // transaction below then finds out why (a changed form, a value taken) and answers.
  const config = def.eventConfig;
  const withEvents = config !== undefined && !isQuiet(config);
  const alone =
    typeof write.data === 'string' &&
    limit === undefined &&
    !onCreated &&
    files.plan.claims.length + files.plan.inline.length === 0 &&
    write.unique.every((v) => v.alt === undefined) &&
    config !== undefined &&
    repo.createsAlone(ctx.db)
      ? write.data
      : undefined;
  if (check && !check.confirmed && alone === undefined) throw new repo.TokenUnconfirmed();

  // Inline bytes and the copies of presigned uploads go to storage before the transaction (no
  // slow I/O inside it) and are removed again if the transaction does not commit.
  await storeFiles(ctx, files.plan);
  const newRow: repo.NewSubmission = {
    accountId,
    formId,
    userAgent: meta.userAgent,
    remoteAddr: meta.remoteAddr,
    latitude: input.latitude ?? null,
    longitude: input.longitude ?? null,
  };
  try {
    if (alone !== undefined) {
      let created: Submission | undefined;
      const { requestId } = meta;
      const jobs = withEvents
        ? (row: SubmissionRow) => {
            const made = createdEvent(ctx, def, accountId, row, data);
            created = made.submission;
            return jobRowsOf(submissionEventJobs(ctx, made.event, config), requestId);
          }
        : undefined;
      const row = await repo.createAlone(ctx.db, newRow, write, alone, def.form.revision, jobs, check);
      if (row) {
        attempt.checked = true;
        if (jobs) wakeWorkers();
        return created ?? toSubmission(def, row, data);
      }
    }
    // In the transaction jobs are enqueued the usual way (publishSubmissionEvent, a file's
    // removal, onCreated's), which reads the request id from its context.
    return await withHeldRequestId(meta.requestId, () =>
      deps.write(async (trx) => {
        if (limit !== undefined) {
          // The creates of a limited form take turns from here to their commit (see
          // holdCountOfForm), so the count read here is the one this create adds to.
          const held = await holdCountOfForm(trx, accountId, formId);
          if (held?.revision !== def.form.revision) throw new StaleDefinition();
          attempt.checked = true;
          if (held.count >= limit) throw full();
        }
        const heldAlt = await heldOtherWay(trx, def, write);
        const { row, taken, revision } = await repo.createSubmission(trx, newRow, write);
        if (revision !== def.form.revision) throw new StaleDefinition();
        attempt.checked = true;
        failIfTaken(def, write, heldAlt, taken);
        await commitFiles(trx, accountId, files.plan, row.id, ctx.clock.now());
        const { submission, event } = createdEvent(ctx, def, accountId, row, data);
        await onCreated?.(trx, event.submission!);
        // The revision was checked above, so what is read now is the configuration of def's revision.
        def.eventConfig ??= await loadEventConfig(trx, accountId, formId);
        await publishSubmissionEvent(trx, ctx, event, def.eventConfig);
        return submission;
      }),
    );
  } catch (error) {
    await discardFiles(ctx, files.plan, meta.requestId);
    throw error;
  }
}

/**
 * A new row's record and its submission.created event, which carries the record without its
 * values on an encrypted form (the service keeps no plaintext copy) and the values apart.
 */
function createdEvent(
  ctx: SubmissionsDeps['ctx'],
  def: FormDefinition,
  accountId: number,
  row: SubmissionRow,
  data: DataMap,
): { submission: Submission; event: SubmissionEvent } {
  const submission = toSubmission(def, row, data);
  return {
    submission,
    event: {
      type: 'submission.created',
      accountId,
      formId: def.formId,
      submissionId: row.id,
      occurredAt: ctx.clock.now(),
      sealed: def.seal !== undefined,
      submission: def.seal ? { ...submission, prettyName: null, data: [] } : submission,
      ...(def.seal && { plainValues: data }),
    },
  };
}

/**
 * Edits open the stored values with the password and seal the result again. The fields not
 * named keep what the row held when it was read, so the write goes in only if the row still
 * holds that (StaleRow otherwise): two edits of other fields at once both land, the later
 * merged into what the earlier wrote.
 */
export const updateSubmission = (...args: Parameters<typeof updateOnce>): Promise<Submission> =>
  againIfStale(() => updateOnce(...args));

async function updateOnce(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { submissionId: id }: SubmissionRef,
  input: SubmissionUpdate,
  password?: string,
): Promise<Submission> {
  const { row, def } = await requireSubmission(deps, { accountId }, { submissionId: id });
  const { ctx } = deps;
  const data = parseData(def, row, await keysFor(deps, def, password));
  const files = await resolveFiles(ctx, def, accountId, input.fields, { submissionId: id, data });
  const write = prepareSubmission(def, files.inputs, data, ctx.clock.now());
  await storeFiles(ctx, files.plan);
  try {
    return await deps.write(async (trx) => {
      const heldAlt = await heldOtherWay(trx, def, write, id);
      const written = await repo.updateSubmission(trx, accountId, row, write);
      if (!written) throw new StaleRow();
      const { row: updated, taken } = written;
      failIfTaken(def, write, heldAlt, taken);
      await commitFiles(trx, accountId, files.plan, id, ctx.clock.now());
      const submission = toSubmission(def, updated, data);
      await publishSubmissionEvent(trx, ctx, {
        type: 'submission.updated',
        accountId,
        formId: row.form_id,
        submissionId: id,
        occurredAt: ctx.clock.now(),
        sealed: def.seal !== undefined,
        submission: def.seal ? { ...submission, prettyName: null, data: [] } : submission,
      });
      await noteChange(trx, def, accountId, 0, row.created_at);
      return submission;
    });
  } catch (error) {
    await discardFiles(ctx, files.plan);
    throw error;
  }
}

export async function deleteSubmission(
  deps: SubmissionsDeps,
  { accountId }: AccountScope,
  { submissionId: id }: SubmissionRef,
): Promise<{ id: number; formId: number; deleted: true }> {
  const { ctx } = deps;
  return deps.write(async (trx) => {
    const row = await repo.findSubmission(trx, accountId, id);
    // Locked before what goes with it is read: a document being recorded meanwhile is seen.
    if (!row || !(await repo.lockSubmission(trx, id))) throw new NotFoundError('submission_not_found');
    const uploads = await uploadsRepo.uploadsOfSubmission(trx, id);
    await removeAfterUrlExpiry(
      trx,
      uploads.map((u) => u.file_key),
      ctx.clock.now(),
    );
    const objects = await uploadsRepo.deleteUploads(
      trx,
      uploads.map((u) => u.file_key),
    );
    // Documents made from it go with its row (ON DELETE CASCADE); their objects with its files.
    objects.push(...(await documentKeysOf(trx, id)));
    // Two deletes of one row both read it live (PostgreSQL); the second deletes nothing and is
    // a 404, its transaction undone, rather than a second count down and a second event.
    if (!(await repo.deleteSubmission(trx, accountId, id))) throw new NotFoundError('submission_not_found');
    await noteSubmissionChange(trx, accountId, row.form_id, -1, row.created_at);
    // The objects go once this commits, through the outbox.
    if (objects.length > 0) await enqueue(trx, removeFilesJob, { keys: objects });
    await publishSubmissionEvent(trx, ctx, {
      type: 'submission.deleted',
      accountId,
      formId: row.form_id,
      submissionId: id,
      occurredAt: ctx.clock.now(),
      sealed: isSealed(row.data),
      submission: null,
    });
    return { id, formId: row.form_id, deleted: true };
  });
}
