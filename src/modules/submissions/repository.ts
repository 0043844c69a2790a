import { permittedForms } from '../permissions/repository.js';
import { sql, type Insertable, type Kysely, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import { countMadeAgain, sharedStatements } from '../../db/coalescer.js';
import { hotQuery, type HotStatement } from '../../db/hot-query.js';
import { createThreadOf, type CreateStatements, type ThreadStatement } from '../../db/sqlite-create-thread.js';
import { fullTextOf, insertFullText } from '../../db/sqlite-engine.js';
import { engineOf, type SqlEngine } from '../../db/engine.js';
import type { Database, SubmissionRow } from '../../db/schema.js';
import { isStatementAbort, translateDbError, type Executor } from '../../db/transaction.js';
import {
  addToCount,
  addToHour,
  countOfForm,
  countOfHours,
  HOUR_ADDED,
  HOUR_MS,
  idBoundsOfHours,
  noteSubmissionChange,
  revisionForWrite,
} from '../forms/counts.js';
import {
  insertJobRow,
  jobArguments,
  jobsAsArgs,
  jobsInsertedFrom,
  jobsNotified,
  JOBS_CHANNEL,
  type NewJobRow,
} from '../../jobs/repository.js';
import { formToken, type Term } from './keywords.js';

export interface SubmissionWrite {
  /** The JSON of the values, or, on an encrypted form, what seals them for a row id. */
  data: string | ((submissionId: number) => string);
  prettyName: string | null;
  /** Every token of the full-text index: words and field tokens (see keywords.ts). */
  tokens: string[];
  /** Normalized values of the fields marked unique (an HMAC of them on encrypted forms); alt is checked too, not stored. */
  unique: { fieldId: number; norm: string; alt?: string }[];
  now: number;
}

export interface ResolvedFilter {
  from?: number;
  to?: number;
  /** Full-text terms that must all appear: keyword words and field criteria. */
  terms: Term[];
  /** A filter that nothing can match (a keyword with no words in it). */
  impossible?: boolean;
  /** A member's user id: only forms they hold a permission on (account-wide lists). */
  visibleTo?: number;
}

type SubmissionQuery = SelectQueryBuilder<Database, 'submissions', object>;

function dataFor(w: SubmissionWrite, id: number): string {
  return typeof w.data === 'string' ? w.data : w.data(id);
}

/**
 * Writes the row's unique values and full-text tokens. Returns the unique fields whose value
 * another submission of the form holds: the unique index decides, so two writers of one value
 * at once cannot both get in (on PostgreSQL the second waits for the first to commit or roll
 * back). The caller then fails the write, which rolls the rest back.
 */
async function writeSearchable(
  db: Executor,
  id: number,
  formId: number,
  w: SubmissionWrite,
  inserted: boolean,
  converting = false,
): Promise<number[]> {
  let taken: number[] = [];
  if (converting) {
    // In a conversion (or a reindex) a conflict is a duplicate let in while values were stored
    // two ways; the later row then keeps its value without the guard rather than stopping the
    // job. Nothing is read back, so each value is its own single-row INSERT without RETURNING:
    // on SQLite a RETURNING (or a multi-row INSERT) opens a statement transaction, which flushes
    // FTS5's pending terms, and a batch of 200 rows wrote 200 index segments (half a reindex's time).
    for (const v of w.unique) await insertUniqueValueQuietly(db, id, formId, v.fieldId, v.norm);
  } else if (w.unique.length > 0) {
    const [one] = w.unique;
    const stored =
      w.unique.length === 1
        ? await insertUniqueValue(db, id, formId, one!.fieldId, one!.norm)
        : await uniqueValuesInsert(
            db,
            w.unique.map((v) => ({ submission_id: id, form_id: formId, field_id: v.fieldId, value_norm: v.norm })),
          ).execute();
    if (stored.length < w.unique.length) {
      const got = new Set(stored.map((r) => r.field_id));
      taken = w.unique.map((v) => v.fieldId).filter((f) => !got.has(f));
    }
  }
  await engineOf(db).writeFullText(db, id, w.tokens, inserted);
  return taken;
}

function uniqueValuesInsert(db: Executor, rows: Insertable<Database['submission_unique_values']>[]) {
  return db
    .insertInto('submission_unique_values')
    .values(rows)
    .onConflict((oc) => oc.doNothing())
    .returning('field_id');
}

/** The one unique value of most forms that have any: the same statement on every write, built once. */
const insertUniqueValue = hotQuery(4, (db, submissionId: number, formId: number, fieldId: number, norm: string) =>
  uniqueValuesInsert(db, [{ submission_id: submissionId, form_id: formId, field_id: fieldId, value_norm: norm }]),
);

const insertUniqueValueQuietly = hotQuery(
  4,
  (db, submissionId: number, formId: number, fieldId: number, norm: string) =>
    db
      .insertInto('submission_unique_values')
      .values({ submission_id: submissionId, form_id: formId, field_id: fieldId, value_norm: norm })
      .onConflict((oc) => oc.doNothing()),
);

async function clearSearchable(db: Executor, id: number): Promise<void> {
  await db.deleteFrom('submission_unique_values').where('submission_id', '=', id).execute();
  await engineOf(db).clearFullText(db, id);
}

/** The columns a new row is written with, but for the full-text column of an engine that has one (PostgreSQL). */
const ROW_COLUMNS = [
  'account_id',
  'form_id',
  'created_at',
  'updated_at',
  'user_agent',
  'remote_addr',
  'latitude',
  'longitude',
  'data',
  'pretty_name',
] as const;

const SUBMISSION_COLUMNS = ['id', ...ROW_COLUMNS] as const;

type RowValues = Pick<Insertable<Database['submissions']>, (typeof ROW_COLUMNS)[number]>;

function submissionInsert(db: Executor, values: Insertable<Database['submissions']>) {
  return db.insertInto('submissions').values(values).returning(SUBMISSION_COLUMNS);
}

/** Such a row's insert: the same statement every time, built once. */
const insertRow = hotQuery(ROW_COLUMNS.length, (db, ...values: unknown[]) =>
  submissionInsert(db, Object.fromEntries(ROW_COLUMNS.map((c, i) => [c, values[i]])) as RowValues),
);

const rowValues = (row: NewSubmission, w: SubmissionWrite, data: string) =>
  ({
    account_id: row.accountId,
    form_id: row.formId,
    created_at: w.now,
    updated_at: w.now,
    user_agent: row.userAgent,
    remote_addr: row.remoteAddr,
    latitude: row.latitude,
    longitude: row.longitude,
    data,
    pretty_name: w.prettyName,
  }) satisfies RowValues;

/**
 * A new row as it is stored, from its id and what was sent: PostgreSQL's create statements
 * return only the id (the data goes in as text, or as json, which keeps its text exactly).
 */
const storedRow = (id: number, row: NewSubmission, w: SubmissionWrite, data: string): SubmissionRow => ({
  id,
  ...rowValues(row, w, data),
});

async function insertSubmission(
  db: Executor,
  row: NewSubmission,
  w: SubmissionWrite,
): Promise<{ row: SubmissionRow; taken: number[] }> {
  const values = rowValues(row, w, typeof w.data === 'string' ? w.data : '');
  const fullText = engineOf(db).fullTextColumns(w.tokens);
  const inserted =
    Object.keys(fullText).length === 0
      ? (await insertRow(db, ...ROW_COLUMNS.map((c) => values[c])))[0]!
      : await submissionInsert(db, { ...values, ...fullText }).executeTakeFirstOrThrow();
  if (typeof w.data !== 'string') {
    // Sealed data is bound to the row's id, known only now; the empty value never leaves the transaction.
    inserted.data = w.data(inserted.id);
    await db.updateTable('submissions').set({ data: inserted.data }).where('id', '=', inserted.id).execute();
  }
  const taken = await writeSearchable(db, inserted.id, row.formId, w, true);
  return { row: inserted, taken };
}

/**
 * A plain submission's create on PostgreSQL, in one statement: the form's revision under a share
 * lock (a change to the form waits for this write's commit), the row with its full-text vector,
 * its unique values (ON CONFLICT DO NOTHING: the unique index decides, and a value taken comes
 * back missing), and the count's slot and hour. Built once; prepared once per connection.
 * alone: the statement is the whole write, run outside a transaction; it then ends itself
 * with an error (formwork_abort, migration 0034) unless the form is at revision and every
 * unique value went in, so that all of it is undone.
 * Only the row's id comes back (see storedRow).
 */
const insertWithCounts = hotQuery(
  17,
  (
    db,
    accountId: number,
    formId: number,
    now: number,
    userAgent: string,
    remoteAddr: string,
    latitude: number | null,
    longitude: number | null,
    data: string,
    prettyName: string | null,
    tokens: string[],
    uniqueFields: number[],
    uniqueNorms: string[],
    hour: number,
    alone: boolean,
    revision: number,
    /** The create's TokenCheck, or null and null. */
    tokenId: number | null,
    role: string | null,
  ) => {
    const engine = engineOf(db);
    const slot = engine.countSlot();
    const query = sql<{ id: number; revision: number | null; stored: number[] }>`
    WITH f AS (SELECT revision FROM forms WHERE id = ${formId} AND account_id = ${accountId} FOR SHARE),
    s AS (
      INSERT INTO submissions (account_id, form_id, created_at, updated_at, user_agent, remote_addr,
        latitude, longitude, data, pretty_name, search_vector)
      VALUES (${accountId}, ${formId}, ${now}, ${now}, ${userAgent}, ${remoteAddr},
        ${latitude}, ${longitude}, ${data}, ${prettyName}, ${engine.fullTextColumns(tokens).search_vector})
      RETURNING id
    ),
    u AS (
      INSERT INTO submission_unique_values (submission_id, form_id, field_id, value_norm)
      SELECT s.id, ${formId}, v.field_id, v.value_norm
      FROM s, unnest(${uniqueFields}::int[], ${uniqueNorms}::text[]) AS v(field_id, value_norm)
      ON CONFLICT DO NOTHING
      RETURNING field_id
    ),
    c AS (
      INSERT INTO form_submission_counts (form_id, slot, n, version)
      SELECT ${formId}, ${slot}, 1, 1 FROM f
      ON CONFLICT (form_id, slot) DO UPDATE
      SET n = form_submission_counts.n + 1, version = form_submission_counts.version + 1
    ),
    h AS (
      INSERT INTO submission_hours (form_id, hour, slot, n, first_id, last_id)
      SELECT ${formId}, ${hour}, ${slot}, 1, s.id, s.id FROM f, s
      ON CONFLICT (form_id, hour, slot) DO UPDATE SET ${HOUR_ADDED}
    )
    SELECT s.id, (SELECT revision FROM f) AS revision, ARRAY(SELECT field_id FROM u) AS stored FROM s
    WHERE CASE WHEN ${tokenId}::int IS NOT NULL AND NOT ${tokenLive(sql`${tokenId}::int`, sql`${accountId}::int`, sql`${now}::int8`, sql`${role}::text`)}
        THEN formwork_abort(${sql.lit(TOKEN_NOT_LIVE)})
      WHEN ${alone}::boolean AND ((SELECT revision FROM f) IS DISTINCT FROM ${revision}::integer
        OR (SELECT count(*) FROM u) < cardinality(${uniqueFields}::int[]))
      THEN formwork_abort('create_alone') ELSE true END`;
    return { compile: () => query.compile(db) };
  },
);

export interface NewSubmission {
  accountId: number;
  formId: number;
  userAgent: string;
  remoteAddr: string;
  latitude: number | null;
  longitude: number | null;
}

/** Unique values in field order: every create writes its values in one order (see insertTogether). */
const byField = (unique: SubmissionWrite['unique']) =>
  unique.length < 2 ? unique : [...unique].sort((x, y) => x.fieldId - y.fieldId);

const insertArgs = (row: NewSubmission, w: SubmissionWrite, data: string) =>
  [
    row.accountId,
    row.formId,
    w.now,
    row.userAgent,
    row.remoteAddr,
    row.latitude,
    row.longitude,
    data,
    w.prettyName,
    w.tokens,
    byField(w.unique).map((v) => v.fieldId),
    byField(w.unique).map((v) => v.norm),
    Math.floor(w.now / HOUR_MS),
  ] as const;

/**
 * Whether createAlone may write on db: on PostgreSQL one statement is a whole create; on
 * SQLite on a file, the create thread writes it (src/db/sqlite-create-thread.ts).
 */
export const createsAlone = (db: Executor): boolean => {
  if (db.isTransaction) return false;
  const engine = engineOf(db);
  return engine.writableCtes ? engine.writeBatchSize === undefined : threadOf(db) !== undefined;
};

/** A plain create's row on the create thread: without RETURNING, its id is the insert's rowid. */
const insertRowOnly = hotQuery(ROW_COLUMNS.length, (db, ...values: unknown[]) =>
  db.insertInto('submissions').values(Object.fromEntries(ROW_COLUMNS.map((c, i) => [c, values[i]])) as RowValues),
);

/** A unique value on the create thread: a value taken changes no row. */
const insertUniqueOnly = hotQuery(4, (db, submissionId: number, formId: number, fieldId: number, norm: string) =>
  db
    .insertInto('submission_unique_values')
    .values({ submission_id: submissionId, form_id: formId, field_id: fieldId, value_norm: norm })
    .onConflict((oc) => oc.doNothing()),
);

/** Whether a unique value is held, on the create thread (which holds the write lock while it looks). */
const uniqueHeld = hotQuery(3, (db, formId: number, fieldId: number, norm: string) =>
  db
    .selectFrom('submission_unique_values')
    .select('submission_id')
    .where('form_id', '=', formId)
    .where('field_id', '=', fieldId)
    .where('value_norm', '=', norm),
);

const forThread = <O>(db: Executor, query: { compiledFor(db: Executor): HotStatement<O> }): ThreadStatement => {
  const { query: compiled, slots } = query.compiledFor(db);
  return { sql: compiled.sql, slots };
};

/** What the create thread writes, compiled by Kysely here and by the repositories that own each table. */
const threadStatements = (db: Executor): CreateStatements => ({
  row: forThread(db, insertRowOnly),
  unique: forThread(db, insertUniqueOnly),
  held: forThread(db, uniqueHeld),
  revision: forThread(db, revisionForWrite),
  count: forThread(db, addToCount),
  hour: forThread(db, addToHour),
  fullText: forThread(db, insertFullText),
  job: forThread(db, insertJobRow),
});

const threadOf = (db: Executor) =>
  db.isTransaction ? undefined : createThreadOf(db as Kysely<Database>, () => threadStatements(db));

/**
 * A plain create on SQLite's create thread, in the next batch it writes: the row, its unique
 * values, the counts and the full-text row, all or nothing. Undefined when it wrote nothing
 * (a changed or deleted form, a value taken, a failed batch): the caller then makes the create
 * in a transaction on the main connection, which says why.
 */
async function createInThread(
  db: Kysely<Database>,
  { row, w, data, revision, jobs }: AloneCreate,
): Promise<SubmissionRow | undefined> {
  const thread = threadOf(db);
  if (!thread) return undefined;
  const values = rowValues(row, w, data);
  const id = await thread.write(
    {
      accountId: row.accountId,
      formId: row.formId,
      row: ROW_COLUMNS.map((c) => values[c]),
      revision,
      hour: Math.floor(w.now / HOUR_MS),
      unique: byField(w.unique).map((v) => [v.fieldId, v.norm]),
      fullText: fullTextOf(w.tokens),
      events: jobs !== undefined,
    },
    jobs && ((newId) => jobs({ id: newId, ...values }).map(jobArguments)),
  );
  return id === 0 ? undefined : { id, ...values };
}

/**
 * Writes a new submission outside any transaction of the caller's, all or nothing: its row,
 * unique values, index and counts. On PostgreSQL in one statement, shared with the creates that
 * arrive while two such statements are out (Coalescer, createAllAlone); on SQLite in the create
 * thread's next batch. With jobs, the outbox rows of its events (made from its row) go in the
 * same statement or batch, and the listening workers are notified at its commit. Returns the
 * row, or undefined when nothing was written because the form is not at revision (changed,
 * deleted) or a unique value is taken; the caller then makes the create in a transaction,
 * which says which. With a check, throws TokenUnconfirmed instead while no statement has found
 * the token live.
 */
export async function createAlone(
  db: Kysely<Database>,
  row: NewSubmission,
  w: SubmissionWrite,
  data: string,
  revision: number,
  jobs?: AloneCreate['jobs'],
  check?: TokenCheck,
): Promise<SubmissionRow | undefined> {
  const create: AloneCreate = { row, w, data, revision, jobs, check };
  // SQLite's create thread checks no token: its look-ups cost no round trip (BearerTokens).
  if (!engineOf(db).writableCtes) {
    if (check) throw new TokenUnconfirmed();
    return createInThread(db, create);
  }
  const created = await createInStatements(db, create);
  // Nothing written before a statement found the token live: the caller looks it up first.
  if (created === undefined && check && !check.confirmed) throw new TokenUnconfirmed();
  return created;
}

/** createAlone on PostgreSQL: a shared statement, then, if that failed for another's sake, one of its own. */
async function createInStatements(db: Kysely<Database>, create: AloneCreate): Promise<SubmissionRow | undefined> {
  const outcome = await sharedStatements(db, createAllAlone, TOGETHER).call(create);
  if (outcome !== AGAIN) return settled(outcome);
  // Not made again for a token that no statement found live.
  if (create.check && !create.check.confirmed) return undefined;
  if (!create.jobs) return createOneAlone(db, create);
  // A create with events is made again alone as a statement of its own (a new id drawn, its
  // outbox rows made anew); if that fails for its own sake too, the caller's transaction says why.
  const [again] = await createAllAlone(db, [create]);
  return again === AGAIN ? undefined : settled(again!);
}

function settled(outcome: Exclude<AloneOutcome, typeof AGAIN>): SubmissionRow | undefined {
  if (outcome instanceof Error) throw outcome;
  return outcome;
}

interface AloneCreate {
  row: NewSubmission;
  w: SubmissionWrite;
  /** The values as a JSON object's text (insertTogether takes it in as it is). */
  data: string;
  revision: number;
  /** The outbox rows of the create's events, given its row. */
  jobs?: (row: SubmissionRow) => NewJobRow[];
  /** The token the create acts for, checked in its statement (TokenCheck). */
  check?: TokenCheck;
}

/**
 * The token a create acts for, as the process last read it (BearerTokens.unconfirmedOwner), to
 * be found again in the create's own statement: unrevoked, unexpired at the create's time, of
 * the create's account, its user's role the one read. The statement writes nothing unless
 * every such token in it is; its snapshot is taken after the request arrived, so a revocation
 * or a new role answered before then is seen, as by a look-up of its own. On PostgreSQL this
 * spares a plain create the token's look-up, a round trip before its statement.
 */
export interface TokenCheck {
  tokenId: number;
  role: string;
  /** Set once a statement has found the token live: the create goes on as any other, refusals shown. */
  confirmed?: boolean;
}

/**
 * A create with a TokenCheck that wrote nothing before a statement found its token live:
 * refused by the check, or by anything before it (a refusal may not be shown to a token that
 * is not live). Its caller looks the token up and makes the create again.
 */
export class TokenUnconfirmed extends Error {
  constructor() {
    super('token_unconfirmed');
  }
}

/** A create that went with others whose statement failed: it is made again on its own. */
const AGAIN = Symbol('again');
type AloneOutcome = SubmissionRow | undefined | Error | typeof AGAIN;

/**
 * At most 32 creates in one statement (its rows are locked until it commits), two such
 * statements out at once, the second with 16 or more (Coalescer's mayTake); one out for 50 ms
 * (waiting for a form's lock, say) no longer counts.
 */
const TOGETHER = { kind: 'submission_create', max: 32, inFlight: 2, slowMs: 50 };

async function createOneAlone(db: Executor, c: AloneCreate): Promise<SubmissionRow | undefined> {
  const { check } = c;
  try {
    const args = insertArgs(c.row, c.w, c.data);
    const [created] = await insertWithCounts(
      db,
      ...args,
      true,
      c.revision,
      check?.tokenId ?? null,
      check?.role ?? null,
    );
    confirm([c]);
    return storedRow(created!.id, c.row, c.w, c.data);
  } catch (error) {
    if (!isStatementAbort(error)) throw translateDbError(error);
    if (!tokenNotLive(error)) confirm([c]);
    return undefined;
  }
}

/** The statement that carried these creates' TokenChecks found every token live. */
const confirm = (creates: AloneCreate[]) => {
  for (const c of creates) if (c.check) c.check.confirmed = true;
};

/** formwork_abort's reason when a create's TokenCheck fails; checked before any other reason. */
const TOKEN_NOT_LIVE = 'token_not_live';
const tokenNotLive = (error: unknown) => (error as { message?: unknown }).message === TOKEN_NOT_LIVE;

/** Whether the token is live for a create of the account at time now, its user's role the one given (TokenCheck). */
const tokenLive = (
  tokenId: RawBuilder<unknown>,
  accountId: RawBuilder<unknown>,
  now: RawBuilder<unknown>,
  role: RawBuilder<unknown>,
) =>
  sql`EXISTS (SELECT 1 FROM access_tokens k JOIN users ku ON ku.id = k.user_id
    WHERE k.id = ${tokenId} AND k.account_id = ${accountId} AND k.revoked_at IS NULL
      AND (k.expires_at IS NULL OR k.expires_at > ${now}) AND ku.role = ${role})`;

/**
 * Creates that arrived together, on one connection: one alone as createAlone's own statement,
 * several in one statement (insertTogether). When that statement fails for one of its creates'
 * sake (madeAgainAlone: a form changed, a value taken, by another or within the statement),
 * each is made again alone, so that each gets its own answer.
 */
async function createAllAlone(connection: Executor, creates: AloneCreate[]): Promise<AloneOutcome[]> {
  const withJobs = creates.some((c) => c.jobs !== undefined);
  if (creates.length === 1 && !withJobs) {
    try {
      return [await createOneAlone(connection, creates[0]!)];
    } catch (error) {
      return [asError(error)];
    }
  }
  try {
    // With jobs, each create's row is made before the statement (its outbox rows carry it) and is its answer.
    const withRows = withJobs ? await togetherWithJobsArgs(connection, creates) : undefined;
    const rows = withRows
      ? await insertTogetherWithJobs(connection, ...withRows.args)
      : await insertTogether(connection, ...togetherArgs(creates));
    confirm(creates);
    const byIndex = new Map(rows.map((r) => [Number(r.i), r.id]));
    return creates.map((c, i) => {
      const id = byIndex.get(i + 1);
      if (id === undefined) return AGAIN;
      return withRows?.made[i] ?? storedRow(id, c.row, c.w, c.data);
    });
  } catch (error) {
    if (madeAgainAlone(error)) {
      // Its tokens were all checked first: any other reason to end says they were live.
      if (isStatementAbort(error) && !tokenNotLive(error)) confirm(creates);
      countMadeAgain(TOGETHER.kind, creates.length);
      return creates.map(() => AGAIN);
    }
    // Anything else (a connection lost, maybe after the commit) is every create's error: made
    // again, a create that went in would go in twice.
    const failed = asError(translateDbError(error));
    return creates.map(() => failed);
  }
}

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/**
 * The failures of a shared statement that say only that one of its creates could not go in
 * with the others: its own end (a form not at revision, a value taken), a value taken at the
 * unique index, a deadlock, a form locked by another transaction (NOWAIT).
 */
const madeAgainAlone = (error: unknown): boolean =>
  isStatementAbort(error) || ['23505', '40P01', '55P03'].includes(String((error as { code?: unknown })?.code));

/**
 * The arguments of insertTogether: the creates' columns as JSON (one object each, with its
 * index from 1), their data and their tokens as text, a line each, and their unique values as
 * JSON (with the create's index). node-postgres writes a JS array as an array literal,
 * escaping each element in JavaScript: for a batch's data and tokens that was 7% of the
 * process's time, so nothing here is an array. The data and the tokens are lines because
 * PostgreSQL splits a text on a character far faster than it parses JSON (which it did three
 * times over each data as part of a JSON list, 10% of its time on a create): a JSON text
 * (JSON.stringify's) holds no raw line break, and a token only letters, digits and '_'
 * (keywords.ts), so ' ' and '\n' separate them unambiguously.
 */
function togetherArgs(creates: AloneCreate[], ids?: number[]): [string, string, string, string] {
  const unique: { i: number; f: number; n: string }[] = [];
  creates.forEach((c, i) => {
    for (const v of c.w.unique) unique.push({ i: i + 1, f: v.fieldId, n: v.norm });
  });
  const columns = creates.map((c, i) => ({
    i: i + 1,
    a: c.row.accountId,
    f: c.row.formId,
    t: c.w.now,
    ua: c.row.userAgent,
    ra: c.row.remoteAddr,
    la: c.row.latitude,
    lo: c.row.longitude,
    p: c.w.prettyName,
    h: Math.floor(c.w.now / HOUR_MS),
    r: c.revision,
    ...(c.check && { k: c.check.tokenId, ro: c.check.role }),
    // Last: bench/pgbench.ts finds a create's drawn id as `"id":N}` in its capture.
    ...(ids && { id: ids[i] }),
  }));
  return [
    JSON.stringify(columns),
    creates.map((c) => c.data).join('\n'),
    creates.map((c) => c.w.tokens.join(' ')).join('\n'),
    JSON.stringify(unique),
  ];
}

/**
 * insertTogetherWithJobs's arguments, and each create's row as it will be stored: the batch's
 * ids are drawn first (takeIds), so that each create's outbox rows, made from its row, go in
 * with it.
 */
async function togetherWithJobsArgs(
  connection: Executor,
  creates: AloneCreate[],
): Promise<{ args: [string, string, string, string, string, string, string]; made: SubmissionRow[] }> {
  const ids = await takeIds(connection, creates.length);
  const made = creates.map((c, i) => storedRow(ids[i]!, c.row, c.w, c.data));
  const jobs = creates.flatMap((c, i) => c.jobs?.(made[i]!) ?? []);
  return { args: [...togetherArgs(creates, ids), ...jobsAsArgs(jobs), JOBS_CHANNEL], made };
}

/**
 * Several plain creates in one statement (PostgreSQL, outside any transaction): what
 * insertWithCounts writes for one, for each, with the counts' slot and hours added once per
 * form and hour. It ends itself (formwork_abort) unless every form is at the revision its
 * create expects, every unique value went in and every create's TokenCheck holds, and then
 * none of it stays. Ids are drawn first, so that each create's row, values and answer are
 * matched by its index, not by the order PostgreSQL returns rows in. Unique values, counts
 * and hours are written in the order of their keys (as a create alone writes its values, see
 * insertArgs), so that two such statements never wait for each other's rows the other way
 * round. The forms are share-locked without waiting: a transaction that changes several forms
 * locks them in no set order, and a statement that waited for one while holding another could
 * close a cycle with it; instead the statement fails at once and its creates are made alone,
 * where waiting is safe.
 */
function togetherQuery(
  db: Executor,
  creates: string,
  data: string,
  tokens: string,
  unique: string,
  /** The batch's ids, drawn before (drawIds), in creates' "id", and the outbox rows of its events (jobsAsArgs). */
  withJobs?: { jobs: string; payloads: string; channel: string },
) {
  const slot = engineOf(db).countSlot();
  const ids = withJobs
    ? sql`SELECT i, id FROM v`
    : sql`SELECT i, nextval((SELECT pg_get_serial_sequence('submissions', 'id')::regclass))::int AS id FROM v`;
  const query = sql<{ id: number; i: number }>`
    WITH v AS (
      SELECT v.i, v.id, v.a, v.f, v.t, v.ua, v.ra, v.la, v.lo, v.p, v.h, v.r, v.k, v.ro
      FROM jsonb_to_recordset(${creates}::jsonb) AS v(i int, id int, a int, f int, t int8, ua text, ra text,
        la float8, lo float8, p text, h int, r int, k int, ro text)
    ),
    d AS (SELECT i, d FROM unnest(string_to_array(${data}::text, E'\\n')) WITH ORDINALITY AS d(d, i)),
    f AS (SELECT id, account_id, revision FROM forms WHERE id IN (SELECT f FROM v) FOR SHARE NOWAIT),
    ids AS MATERIALIZED (${ids}),
    t AS (
      SELECT i, array_to_tsvector(string_to_array(line, ' ')) AS vector
      FROM unnest(string_to_array(${tokens}::text, E'\\n')) WITH ORDINALITY AS o(line, i)
    ),
    u AS (SELECT u.i, u.f, u.n FROM jsonb_to_recordset(${unique}::jsonb) AS u(i int, f int, n text)),
    s AS (
      INSERT INTO submissions (id, account_id, form_id, created_at, updated_at, user_agent, remote_addr,
        latitude, longitude, data, pretty_name, search_vector)
      SELECT ids.id, v.a, v.f, v.t, v.t, v.ua, v.ra, v.la, v.lo, d.d, v.p, t.vector
      FROM v JOIN ids ON ids.i = v.i JOIN d ON d.i = v.i JOIN t ON t.i = v.i
      RETURNING id
    ),
    w AS (
      INSERT INTO submission_unique_values (submission_id, form_id, field_id, value_norm)
      SELECT ids.id, v.f, u.f, u.n FROM u JOIN v ON v.i = u.i JOIN ids ON ids.i = u.i ORDER BY v.f, u.f, u.n
      ON CONFLICT DO NOTHING
      RETURNING field_id
    ),
    c AS (
      INSERT INTO form_submission_counts (form_id, slot, n, version)
      SELECT f, ${slot}, count(*), count(*) FROM v GROUP BY f ORDER BY f
      ON CONFLICT (form_id, slot) DO UPDATE
      SET n = form_submission_counts.n + excluded.n, version = form_submission_counts.version + excluded.version
    ),
    h AS (
      INSERT INTO submission_hours (form_id, hour, slot, n, first_id, last_id)
      SELECT v.f, v.h, ${slot}, count(*), min(ids.id), max(ids.id) FROM v JOIN ids ON ids.i = v.i
      GROUP BY v.f, v.h ORDER BY v.f, v.h
      ON CONFLICT (form_id, hour, slot) DO UPDATE SET ${HOUR_ADDED}
    )${
      withJobs
        ? sql`,
    j AS (${jobsInsertedFrom(withJobs.jobs, withJobs.payloads)})`
        : sql``
    }
    SELECT s.id, ids.i${
      withJobs ? sql`, ${jobsNotified('j', withJobs.channel)} AS notified` : sql``
    } FROM s JOIN ids ON ids.id = s.id
    WHERE CASE WHEN EXISTS (SELECT 1 FROM v WHERE v.k IS NOT NULL AND NOT ${tokenLive(sql`v.k`, sql`v.a`, sql`v.t`, sql`v.ro`)})
        THEN formwork_abort(${sql.lit(TOKEN_NOT_LIVE)})
      WHEN EXISTS (
        SELECT 1 FROM v LEFT JOIN f ON f.id = v.f AND f.account_id = v.a WHERE f.revision IS DISTINCT FROM v.r)
      OR (SELECT count(*) FROM w) < (SELECT count(*) FROM u)
      THEN formwork_abort('create_together') ELSE true END`;
  return { compile: () => query.compile(db) };
}

const insertTogether = hotQuery(4, (db, creates: string, data: string, tokens: string, unique: string) =>
  togetherQuery(db, creates, data, tokens, unique),
);

/** insertTogether for a batch that holds creates with events: their outbox rows go in the same statement. */
const insertTogetherWithJobs = hotQuery(
  7,
  (
    db,
    creates: string,
    data: string,
    tokens: string,
    unique: string,
    jobs: string,
    payloads: string,
    channel: string,
  ) => togetherQuery(db, creates, data, tokens, unique, { jobs, payloads, channel }),
);

/**
 * Ids drawn ahead, per database, for the creates with events of this process (PostgreSQL). A
 * batch takes its ids from here, and a draw is made (on the batch's connection, before its
 * statement) only when too few are left, one at a time, so that most batches send nothing
 * before their statement (docs/performance.md, "Thirty-first pass"). Ids kept longer than
 * KEEP_DRAWN_MS are dropped: a row's id stays close in time to its creation, which
 * submission_hours' bounds of each hour's ids (migration 0037) keep tight. Ids dropped, or
 * left when the process stops, are never used: like any sequence's, submission ids have gaps.
 * So a draw takes ahead twice what was taken since the last one (at least one, at most
 * MAX_AHEAD): a steady create a second, which finds every draw expired, wastes one id, where
 * 64 ahead wasted 64 (int4 ids would have run out in about a year).
 */
interface DrawnIds {
  ids: number[];
  /** When they were drawn (performance.now()). */
  at: number;
  /** How many were taken since. */
  taken: number;
  drawing?: Promise<void>;
}

const drawnIds = new WeakMap<SqlEngine, DrawnIds>();
const MAX_AHEAD = 256;
const KEEP_DRAWN_MS = 1000;

async function takeIds(connection: Executor, n: number): Promise<number[]> {
  const engine = engineOf(connection);
  let pool = drawnIds.get(engine);
  if (!pool) drawnIds.set(engine, (pool = { ids: [], at: 0, taken: 0 }));
  for (;;) {
    if (performance.now() - pool.at >= KEEP_DRAWN_MS) pool.ids = [];
    if (pool.ids.length >= n) {
      pool.taken += n;
      return pool.ids.splice(0, n);
    }
    const drawing = (pool.drawing ??= draw(connection, n, pool));
    try {
      await drawing;
    } finally {
      if (pool.drawing === drawing) pool.drawing = undefined;
    }
  }
}

async function draw(connection: Executor, n: number, pool: DrawnIds): Promise<void> {
  const at = performance.now();
  const count = n + Math.min(MAX_AHEAD, Math.max(1, 2 * pool.taken));
  pool.ids = (await drawIds(connection, count)).map((r) => r.id);
  pool.at = at;
  pool.taken = 0;
}

/** Ids of new submissions, drawn ahead of their insert: a create's outbox rows carry its id. */
const drawIds = hotQuery(1, (db, n: number) => {
  const query = sql<{ id: number }>`
    SELECT nextval((SELECT pg_get_serial_sequence('submissions', 'id')::regclass))::int AS id
    FROM generate_series(1, ${n}::int)`;
  return { compile: () => query.compile(db) };
});

/**
 * Writes a new submission with everything that goes with it: its unique values and index,
 * and its form's counts. Returns the row, the unique fields whose value another submission
 * holds (the caller then fails the transaction), and the form's revision as this write sees
 * it (see noteSubmissionChange; undefined when the form is gone).
 * Where INSERT may run inside WITH (PostgreSQL), a plain submission is one statement, one
 * round trip; otherwise, and for a sealed one (whose data needs its id), one per step.
 */
export async function createSubmission(
  db: Executor,
  row: NewSubmission,
  w: SubmissionWrite,
): Promise<{ row: SubmissionRow; taken: number[]; revision: number | undefined }> {
  const engine = engineOf(db);
  if (!engine.writableCtes || typeof w.data !== 'string') {
    const inserted = await insertSubmission(db, row, w);
    const revision = await noteSubmissionChange(db, row.accountId, row.formId, 1, w.now, inserted.row.id);
    return { ...inserted, revision };
  }
  const [created] = await insertWithCounts(db, ...insertArgs(row, w, w.data), false, 0, null, null);
  const got = new Set(created!.stored);
  return {
    row: storedRow(created!.id, row, w, w.data),
    taken: w.unique.map((v) => v.fieldId).filter((f) => !got.has(f)),
    revision: created!.revision ?? undefined,
  };
}

/**
 * Rewrites a submission's row, then its unique values and index, only if the row still holds
 * the data that w was merged into (existing.data: on an encrypted form the sealed text, which
 * every write seals afresh). An edit names only some fields and keeps the rest as it read
 * them, so writing over an edit that committed after that read would undo it. Undefined when
 * the row was not rewritten (changed, or deleted, since): the caller reads it again. The
 * row's lock, taken first, orders this against a delete of it (see deleteSubmission); on
 * PostgreSQL an edit that waited for it checks the condition against the row as committed.
 */
export async function updateSubmission(
  db: Executor,
  accountId: number,
  existing: SubmissionRow,
  w: SubmissionWrite,
): Promise<{ row: SubmissionRow; taken: number[] } | undefined> {
  const row = await db
    .updateTable('submissions')
    .set({ data: dataFor(w, existing.id), pretty_name: w.prettyName, updated_at: w.now })
    .where('id', '=', existing.id)
    .where('account_id', '=', accountId)
    .where('data', '=', existing.data)
    .returning(SUBMISSION_COLUMNS)
    .executeTakeFirst();
  if (!row) return undefined;
  await clearSearchable(db, existing.id);
  const taken = await writeSearchable(db, existing.id, existing.form_id, w, false);
  return { row, taken };
}

/**
 * Rewrites a submission's stored data and index as a conversion (sealing or opening) makes
 * them, only if the row still holds what was read: an edit that landed meanwhile wins.
 * Returns whether the row was rewritten.
 */
export async function rewriteSubmission(db: Executor, row: SubmissionRow, w: SubmissionWrite): Promise<boolean> {
  const result = await db
    .updateTable('submissions')
    .set({ data: dataFor(w, row.id), pretty_name: w.prettyName })
    .where('id', '=', row.id)
    .where('data', '=', row.data)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) return false;
  await clearSearchable(db, row.id);
  await writeSearchable(db, row.id, row.form_id, w, false, true);
  return true;
}

/**
 * The row's delete takes its unique values with it (SQLite's foreign key, PostgreSQL's trigger:
 * migration 0036), after an edit that holds the row's lock has committed, so that what the
 * edit wrote goes too. Only SQLite's full-text row is apart. False when there was no row to
 * delete: on PostgreSQL another delete of it, read as live, may have committed meanwhile.
 */
export async function deleteSubmission(db: Executor, accountId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('submissions')
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  if (Number(result.numDeletedRows) === 0) return false;
  await engineOf(db).clearFullText(db, id);
  return true;
}

const columns = [
  'submissions.id',
  'submissions.account_id',
  'submissions.form_id',
  'submissions.created_at',
  'submissions.updated_at',
  'submissions.user_agent',
  'submissions.remote_addr',
  'submissions.latitude',
  'submissions.longitude',
  'submissions.data',
  'submissions.pretty_name',
] as const;

/** A submission of a live form of the account. */
export async function findSubmission(db: Executor, accountId: number, id: number): Promise<SubmissionRow | undefined> {
  return db
    .selectFrom('submissions')
    .innerJoin('forms', 'forms.id', 'submissions.form_id')
    .select(columns)
    .where('submissions.id', '=', id)
    .where('submissions.account_id', '=', accountId)
    .where('forms.deleted_at', 'is', null)
    .executeTakeFirst();
}

/**
 * Whether the submission is still there, its row locked until db's transaction ends (on
 * PostgreSQL). A delete takes it before it reads what goes with the row, and a document's
 * record before it is written (docmerge/generate.ts): whichever comes second waits for the
 * other's commit, so a delete sees every document made of the row, and a document never
 * outlives a deleted one.
 */
export async function lockSubmission(db: Executor, id: number): Promise<boolean> {
  const row = await db
    .selectFrom('submissions')
    .select('id')
    .where('id', '=', id)
    .$call(engineOf(db).lockRows)
    .executeTakeFirst();
  return row !== undefined;
}

/** Another submission of the form that holds this value in a unique field, if any. */
export async function findUniqueHolder(
  db: Executor,
  formId: number,
  fieldId: number,
  norm: string,
  except?: number,
): Promise<number | undefined> {
  let q = db
    .selectFrom('submission_unique_values')
    .select('submission_id')
    .where('form_id', '=', formId)
    .where('field_id', '=', fieldId)
    .where('value_norm', '=', norm);
  if (except !== undefined) q = q.where('submission_id', '!=', except);
  return (await q.executeTakeFirst())?.submission_id;
}

/** Applies the time range and the full-text terms to a query over submissions of one scope. */
function applyFilter(db: Executor, query: SubmissionQuery, f: ResolvedFilter): SubmissionQuery | undefined {
  if (f.impossible) return undefined;
  let q = query;
  if (f.from !== undefined) q = q.where('submissions.created_at', '>=', f.from);
  if (f.to !== undefined) q = q.where('submissions.created_at', '<=', f.to);
  if (f.terms.length > 0) {
    q = q.where(engineOf(db).matchFullText(f.terms));
  }
  return q;
}

/**
 * Submissions of one form, or of every live form of the account. A form id must be one
 * that the caller has checked belongs to the account; the form scope then needs no
 * account condition, which keeps form queries inside the form's own indexes.
 */
function scope(
  db: Executor,
  accountId: number,
  formId: number | undefined,
  visibleTo: number | undefined,
): SubmissionQuery {
  if (formId !== undefined) return db.selectFrom('submissions').where('submissions.form_id', '=', formId);
  let liveForms = db
    .selectFrom('forms')
    .select('id')
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null);
  if (visibleTo !== undefined) liveForms = liveForms.where('id', 'in', permittedForms(db, visibleTo));
  return db
    .selectFrom('submissions')
    .where('submissions.account_id', '=', accountId)
    .where('submissions.form_id', 'in', liveForms);
}

export interface Listing {
  rows: SubmissionRow[];
  total: number;
}

export interface PageRequest {
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
  /** The total when it is known without counting (an unfiltered form: its counter). */
  knownTotal?: number;
}

async function rowsByIds(db: Executor, ids: number[]): Promise<SubmissionRow[]> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('submissions').select(columns).where('submissions.id', 'in', ids).execute();
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => byId.get(id)).filter((r): r is SubmissionRow => r !== undefined);
}

/**
 * One page of submissions, in id order (the order they arrived), of a form or (formId
 * undefined) of all live forms of the account. The page's ids are found first, from
 * indexes alone, and only those rows are read.
 */
export async function listSubmissions(
  db: Executor,
  accountId: number,
  formId: number | undefined,
  f: ResolvedFilter,
  page: PageRequest,
): Promise<Listing> {
  if (f.impossible) return { rows: [], total: 0 };
  if (formId !== undefined && f.terms.length > 0 && f.from === undefined && f.to === undefined) {
    // The form token scopes the match to the form, where the index can page by itself.
    const found = await engineOf(db).pageFullText(db, [{ token: formToken(formId), prefix: false }, ...f.terms], page);
    if (found) return { rows: await rowsByIds(db, found.ids), total: found.total };
  }
  const q = applyFilter(db, scope(db, accountId, formId, f.visibleTo), f)!;
  const sorted = () =>
    q.select('submissions.id').orderBy('submissions.id', page.order).limit(page.limit).offset(page.offset).execute();
  const [ids, total] = await Promise.all([
    formId !== undefined && f.terms.length === 0 && (f.from !== undefined || f.to !== undefined)
      ? idsInRange(db, formId, q, f, page).then((found) => found ?? sorted())
      : sorted(),
    page.knownTotal ??
      q
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
        .then((r) => Number(r.n)),
  ]);
  return {
    rows: await rowsByIds(
      db,
      ids.map((r) => r.id),
    ),
    total,
  };
}

/** The deepest page that idsInRange looks for by its bound: deeper ones are sorted whole. */
const RANGE_PAGE_DEPTH = 500;

/**
 * The most rows an edge hour may hold for a walk from the hours' bound: past it, the edge is
 * read from the range's rows instead.
 */
const EDGE_HOUR_ROWS = 5_000;

/**
 * A page of a form's ids in a time range, in id order, without sorting the range: ordering a
 * week of a million rows (19,000 ids) by id was most of such a request's time (2.6 of its
 * 3.2 ms on SQLite, docs/performance.md, "Twenty-seventh pass"), and PostgreSQL, asked for the
 * sorted page, walked the primary key from the table's end past every later row (50–280 ms for
 * a week half a year back, "Twenty-eighth pass"). The form's ids are read in order with their
 * times from an edge, by an id index, twice as many as the page needs and more, and those in
 * the range kept. That is exact whatever the times: every id of the range lies on that side of
 * the edge, and the ids are walked in order. The edge, tried in turn until a walk finds enough:
 * - the form's end, where the range is open on that side (newest first since a time, oldest
 *   first up to one);
 * - the bound of the ids created in the range's hours (submission_hours, migration 0037), read
 *   in O(hours): the walk from it also passes the rows of the range's edge hour that lie
 *   outside the range, so it reaches that hour's count further ("Twenty-ninth pass");
 * - the range's largest id (its smallest, ascending) read from the form's time index, a read of
 *   every index entry of the range.
 * The walk is short because a row's time rises with its id, nearly always; where the candidates
 * hold too few of the range (times out of order, rows of other times between), undefined: the
 * range is sorted.
 */
async function idsInRange(
  db: Executor,
  formId: number,
  range: SubmissionQuery,
  f: ResolvedFilter,
  page: PageRequest,
): Promise<{ id: number }[] | undefined> {
  const wanted = page.offset + page.limit;
  if (wanted > RANGE_PAGE_DEPTH) return undefined;
  const desc = page.order === 'desc';
  const edgeTime = desc ? f.to : f.from;
  if (edgeTime === undefined) {
    const fromEnd = await walkIds(db, formId, f, page, undefined);
    if (fromEnd) return fromEnd;
  } else {
    const hourOf = (t: number | undefined) => (t === undefined ? undefined : Math.floor(t / HOUR_MS));
    const hours = await idBoundsOfHours(db, formId, hourOf(f.from), hourOf(f.to), hourOf(edgeTime)!);
    const bound = desc ? hours.high : hours.low;
    if (bound !== null && hours.inCounted <= EDGE_HOUR_ROWS) {
      const fromBound = await walkIds(db, formId, f, page, bound, hours.inCounted);
      if (fromBound) return fromBound;
    }
  }
  // `+ 0` keeps the aggregate off the id index, which it would walk from the form's end.
  const id = sql<number>`submissions.id + 0`;
  const edge = await range.select((eb) => (desc ? eb.fn.max(id) : eb.fn.min(id)).as('bound')).executeTakeFirst();
  if (edge?.bound === null || edge?.bound === undefined) return [];
  return walkIds(db, formId, f, page, Number(edge.bound));
}

/**
 * idsInRange's walk: the form's ids in the page's order from edge (included; undefined: the
 * form's end), 2 × (offset + limit) + 50 of them and `further` more, those in f's range kept;
 * undefined when they hold too few of it to make the page.
 */
async function walkIds(
  db: Executor,
  formId: number,
  f: ResolvedFilter,
  page: PageRequest,
  edge: number | undefined,
  further = 0,
): Promise<{ id: number }[] | undefined> {
  const wanted = page.offset + page.limit;
  const reach = 2 * wanted + 50 + further;
  const bound = edge === undefined ? sql`` : sql`AND id ${sql.raw(page.order === 'desc' ? '<=' : '>=')} ${edge}`;
  const { rows: candidates } = await sql<{ id: number; created_at: number }>`
    SELECT id, created_at FROM ${engineOf(db).submissionsByFormId()} WHERE form_id = ${formId} ${bound}
    ORDER BY id ${sql.raw(page.order === 'desc' ? 'DESC' : 'ASC')} LIMIT ${reach}`.execute(db);
  const ids: { id: number }[] = [];
  for (const c of candidates) {
    if ((f.from !== undefined && c.created_at < f.from) || (f.to !== undefined && c.created_at > f.to)) continue;
    ids.push({ id: c.id });
    if (ids.length === wanted) break;
  }
  if (ids.length < wanted && candidates.length === reach) return undefined;
  return ids.slice(page.offset);
}

/** Rows of a form created in a time range (either end open), counted one by one. */
async function countRows(db: Executor, formId: number, from: number | undefined, to: number | undefined) {
  let q = db.selectFrom('submissions').where('form_id', '=', formId);
  if (from !== undefined) q = q.where('created_at', '>=', from);
  if (to !== undefined) q = q.where('created_at', '<=', to);
  const row = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Submissions of a form created in a time range (either end open, `to` included); the form id
 * must be checked already. The whole hours inside the range are summed from the hourly
 * counts (submission_hours), and only the rows of the two partial hours at its ends are
 * counted one by one: a week costs 168 hours and at most two hours of rows, however many
 * rows the week holds.
 */
export async function countSubmissions(
  db: Executor,
  formId: number,
  from: number | undefined,
  to: number | undefined,
): Promise<number> {
  if (from === undefined && to === undefined) return countOfForm(db, formId);
  // Whole hours [first, end): the first that starts at or after from, up to the one that holds to.
  const first = from === undefined ? undefined : Math.ceil(from / HOUR_MS);
  const end = to === undefined ? undefined : Math.floor((to + 1) / HOUR_MS);
  if (first !== undefined && end !== undefined && first >= end) return countRows(db, formId, from, to);
  const [whole, before, after] = await Promise.all([
    countOfHours(db, formId, first, end),
    first === undefined ? 0 : countRows(db, formId, from, first * HOUR_MS - 1),
    end === undefined ? 0 : countRows(db, formId, end * HOUR_MS, to),
  ]);
  return whole + before + after;
}

/**
 * Submissions of a form in id order after a given id, for streaming exports: each batch
 * is one indexed range read, so memory stays flat however many rows there are.
 */
export async function nextBatch(
  db: Executor,
  accountId: number,
  formId: number,
  f: ResolvedFilter,
  after: number | undefined,
  order: 'asc' | 'desc',
  size: number,
): Promise<SubmissionRow[]> {
  let q = applyFilter(db, scope(db, accountId, formId, f.visibleTo), f);
  if (!q) return [];
  if (after !== undefined) q = q.where('submissions.id', order === 'asc' ? '>' : '<', after);
  return q.select(columns).orderBy('submissions.id', order).limit(size).execute();
}
