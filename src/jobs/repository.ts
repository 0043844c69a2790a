import { sql, type Kysely, type Transaction } from 'kysely';
import { engineOf, type Listener } from '../db/engine.js';
import type { Database } from '../db/schema.js';
import { deleteInSlices, transact, type Executor } from '../db/transaction.js';
import { hotQuery } from '../db/hot-query.js';

/** The channel that a committed enqueue notifies (on PostgreSQL), so that workers of every process wake at once. */
const CHANNEL = 'formwork_jobs';

export interface NewJobRow {
  kind: string;
  payload: string;
  runAt: number;
  maxAttempts: number;
  /** The x-request-id of the request that enqueues it, if any. */
  requestId?: string | undefined;
}

/**
 * One job's row, for a writer that runs the statement itself (SQLite's create thread): its
 * arguments are jobArguments(job). Without RETURNING, as insertRows writes them on SQLite.
 */
export const insertJobRow = hotQuery(
  5,
  (db, kind: string, payload: string, runAt: number, maxAttempts: number, requestId: string | null) =>
    db.insertInto('jobs').values({ kind, payload, run_at: runAt, max_attempts: maxAttempts, request_id: requestId }),
);

export const jobArguments = (job: NewJobRow): unknown[] => [
  job.kind,
  job.payload,
  job.runAt,
  job.maxAttempts,
  job.requestId ?? null,
];

function jobRow(job: NewJobRow) {
  return {
    kind: job.kind,
    payload: job.payload,
    run_at: job.runAt,
    max_attempts: job.maxAttempts,
    request_id: job.requestId ?? null,
  };
}

/**
 * Jobs in a statement on PostgreSQL, alone (insertAndNotify below) or with the rows that cause
 * them (creates with events, submissions/repository.ts): the jobs as two arguments
 * (jobsAsArgs), their insert as a data-modifying WITH query over them, and the notification of
 * their enqueue, an expression over that query's name that sends nothing when it inserted
 * nothing. The channel is an argument of the statement too (JOBS_CHANNEL), as hotQuery wants
 * every value.
 */
export const JOBS_CHANNEL = CHANNEL;

/**
 * The jobs as a statement's two arguments: their other columns as JSON (each with its index
 * from 1), and their payloads as text, one a line. A payload (JSON.stringify's text) holds no
 * raw line break, so '\n' separates them unambiguously, and PostgreSQL splits a text on a
 * character far faster than it lexes JSON: in one JSON argument, a create's two payloads
 * (1.7 KB) were lexed twice over, 6% of PostgreSQL's time on a create with events.
 */
export const jobsAsArgs = (jobs: readonly NewJobRow[]): [string, string] => [
  JSON.stringify(jobs.map((j, i) => ({ i: i + 1, k: j.kind, r: j.runAt, m: j.maxAttempts, q: j.requestId ?? null }))),
  jobs.map((j) => j.payload).join('\n'),
];

/** In the order given, so that ids rise with it (insertJobs answers them in that order). */
export const jobsInsertedFrom = (jobs: string, payloads: string) => sql`
  INSERT INTO jobs (kind, payload, run_at, max_attempts, request_id)
  SELECT x.k, p.p, x.r, x.m, x.q
  FROM json_to_recordset(${jobs}::json) AS x(i int, k text, r int8, m int, q text)
  JOIN unnest(string_to_array(${payloads}::text, E'\\n')) WITH ORDINALITY AS p(p, i) ON p.i = x.i
  ORDER BY x.i
  RETURNING id`;

export const jobsNotified = (inserted: string, channel: string) =>
  sql`(SELECT pg_notify(${channel}, max(id)::text) FROM ${sql.table(inserted)} HAVING count(*) > 0)`;

/**
 * On PostgreSQL, the jobs and the notification of their enqueue in one statement, built once
 * and prepared once per connection: a submission's events enqueue in its transaction, and
 * these were two more statements parsed and planned anew on every create with a webhook or
 * an email. A notification sent in a transaction is delivered when it commits and dropped
 * when it rolls back: exactly when a listening worker should look.
 */
const insertAndNotify = hotQuery(3, (db, jobs: string, payloads: string, channel: string) => {
  const query = sql<{ ids: number[] }>`
    WITH j AS (${jobsInsertedFrom(jobs, payloads)})
    SELECT array_agg(id ORDER BY id) AS ids, ${jobsNotified('j', channel)} AS notified FROM j`;
  return { compile: () => query.compile(db) };
});

/**
 * Jobs to run once the transaction of db commits; their ids in the order given. Workers that
 * listen (PostgreSQL) hear of them at that commit. SQLite has no notifications, and needs
 * none: its one connection makes a worker's claim wait for the enqueuing transaction to end.
 */
export async function insertJobs(db: Executor, jobs: readonly NewJobRow[]): Promise<number[]> {
  const engine = engineOf(db);
  if (engine.writableCtes && engine.notifies) {
    const [row] = await insertAndNotify(db, ...jobsAsArgs(jobs), CHANNEL);
    return row!.ids;
  }
  return engine.insertRows(db, 'jobs', jobs.map(jobRow));
}

/**
 * Of payloads, those a job of kind has and waits with, never begun (queued, no attempt yet).
 * On PostgreSQL their rows stay locked until db's transaction ends: a claim skips locked rows,
 * so none of them begins before the caller's change commits and is read by its run.
 */
export async function waitingPayloads(db: Executor, kind: string, payloads: readonly string[]): Promise<Set<string>> {
  if (payloads.length === 0) return new Set();
  const rows = await db
    .selectFrom('jobs')
    .select('payload')
    .where('kind', '=', kind)
    .where('state', '=', 'queued')
    .where('attempts', '=', 0)
    .where('payload', 'in', payloads)
    .$call(engineOf(db).lockRows)
    .execute();
  return new Set(rows.map((r) => r.payload));
}

/** Whether listenForJobs can hear enqueues of other processes on this database. */
export function canListenForJobs(db: Executor): boolean {
  return engineOf(db).notifies;
}

/** A dedicated connection that calls onNotify with the job id of every committed enqueue; undefined without notifications. */
export async function listenForJobs(
  db: Executor,
  onNotify: (jobId: number) => void,
  onError: (error: Error) => void,
): Promise<Listener | undefined> {
  return engineOf(db).listen(CHANNEL, (payload) => onNotify(Number(payload)), onError);
}

export interface ClaimedJob {
  id: number;
  kind: string;
  payload: string;
  progress: string | null;
  attempts: number;
  max_attempts: number;
  /** The x-request-id of the request that enqueued it, or null. */
  request_id: string | null;
  runId: number;
  /** The lease token of this claim, which fences every later write of the run. */
  token: string;
  /** When it was due (run_at): how far behind its worker is. */
  dueAt: number;
}

export interface Lease {
  owner: string;
  token: string;
  until: number;
}

/**
 * Takes the oldest due queued jobs, up to each group's limit of its kinds, and logs the start
 * of their runs, in one transaction: one write per batch rather than per job, which on SQLite's one connection is
 * what bounds a worker's pace. The jobs share the lease's token: a token fences a job's
 * later writes together with its id, and any later claim of the job writes a new one.
 * PostgreSQL skips rows that another worker is claiming at this moment; SQLite runs the
 * conditional UPDATE under its single write lock, so two claimers can never both match a row.
 */
export type ClaimGroup = ClaimSlots &
  (
    | { kinds: readonly string[]; except?: undefined }
    /** Any kind but these (the kinds a worker does not know, to fail them). */
    | { kinds?: undefined; except: readonly string[] }
  );

interface ClaimSlots {
  /** The key in `limits` of the slots that this group's jobs take: groups may share a pool. */
  pool: string;
  /**
   * Only when the groups before it found all there was (each had free slots and took fewer
   * than it could): a group that reads every due job is then cheap, with no backlog to read past.
   */
  onlyIfDrained?: boolean;
}

/**
 * The first `limit` due jobs of several kinds, oldest first: the first `limit` of each kind
 * (one ordered range of jobs_kind_due each), merged. Asked for all the kinds at once, the
 * planner reads jobs_due in order past every waiting job of other kinds instead, which costs
 * milliseconds a claim behind a backlog.
 */
function dueOfEachKind(trx: Executor, now: number, kinds: readonly string[], limit: number) {
  const ofKind = (kind: string) =>
    trx
      .selectFrom((eb) =>
        eb
          .selectFrom('jobs')
          .select(['id', 'run_at'])
          .where('kind', '=', kind)
          .where('state', '=', sql.lit('queued'))
          .where('run_at', '<=', now)
          .orderBy('run_at')
          .orderBy('id')
          .limit(limit)
          .$call(engineOf(trx).claimRows)
          .as('due'),
      )
      .select(['due.id', 'due.run_at']);
  const [first, ...rest] = kinds;
  const all = rest.reduce((union, kind) => union.unionAll(ofKind(kind)), ofKind(first!));
  return trx
    .selectFrom(all.as('candidate'))
    .select('candidate.id')
    .orderBy('candidate.run_at')
    .orderBy('candidate.id')
    .limit(limit);
}

/**
 * Every kind in the jobs table, by a loose scan of jobs_kind_due: one index seek per kind (a
 * handful), however many jobs wait. Finding jobs of kinds a worker does not know by reading
 * the due jobs instead (`kind NOT IN (…)`) reads past every waiting job of the known kinds,
 * which behind a backlog of deliveries costs tens of milliseconds a claim, and on SQLite
 * sweeps the page cache that the writes of the API need.
 */
async function kindsInTable(db: Executor): Promise<string[]> {
  const { rows } = await sql<{ kind: string | null }>`
    with recursive seen(kind) as (
      select (select min(kind) from jobs)
      union all
      select (select min(later.kind) from jobs as later where later.kind > seen.kind) from seen where seen.kind is not null
    )
    select kind from seen where kind is not null`.execute(db);
  return rows.map((r) => r.kind!);
}

type ClaimRow = Omit<ClaimedJob, 'runId' | 'token' | 'dueAt'> & { run_at: number };

/** The jobs claimed, oldest first as they were picked, with their runs. */
function claimedJobs(rows: (ClaimRow & { run_id: number })[], token: string): ClaimedJob[] {
  // RETURNING has no order.
  rows.sort((a, b) => a.run_at - b.run_at || a.id - b.id);
  return rows.map(({ run_at: dueAt, run_id: runId, ...job }) => ({ ...job, runId, token, dueAt }));
}

/**
 * On PostgreSQL, a claim of known kinds in one statement: for each kind, its oldest due jobs
 * up to its pool's limit (one ordered range of jobs_kind_due each, rows locked and those
 * another claim holds skipped), then each pool's oldest up to its limit, their rows taken
 * and their runs logged. The candidates are a MATERIALIZED CTE, read once (see
 * SqlEngine.rowLocks). A pool's candidates beyond its limit were locked only until the
 * statement ends. This was a transaction of two statements per group and one for the runs,
 * each a round trip; a worker claims every few milliseconds under load.
 */
const claimKnown = hotQuery(
  7,
  (
    db,
    kinds: string[],
    pools: string[],
    limits: number[],
    now: number,
    owner: string,
    token: string,
    until: number,
  ) => {
    const query = sql<ClaimRow & { run_id: number }>`
      WITH c AS MATERIALIZED (
        SELECT d.id, d.run_at, g.pool, g.lim
        FROM unnest(${kinds}::text[], ${pools}::text[], ${limits}::int[]) AS g(kind, pool, lim)
        CROSS JOIN LATERAL (
          SELECT jobs.id, jobs.run_at FROM jobs
          WHERE jobs.kind = g.kind AND jobs.state = 'queued' AND jobs.run_at <= ${now}::bigint
          ORDER BY jobs.run_at, jobs.id
          LIMIT g.lim
          FOR UPDATE SKIP LOCKED
        ) AS d
      ), picked AS (
        SELECT id FROM (
          SELECT id, lim, row_number() OVER (PARTITION BY pool ORDER BY run_at, id) AS n FROM c
        ) AS ranked
        WHERE n <= lim
      ), u AS (
        UPDATE jobs SET state = 'running', attempts = jobs.attempts + 1, lease_owner = ${owner}::text,
          lease_token = ${token}::text, lease_until = ${until}::bigint
        FROM picked
        WHERE jobs.id = picked.id
        RETURNING jobs.id, jobs.kind, jobs.payload, jobs.progress, jobs.attempts, jobs.max_attempts, jobs.run_at,
          jobs.request_id
      ), r AS (
        INSERT INTO job_runs (job_id, attempt, worker, started_at)
        SELECT id, attempts, ${owner}::text, ${now}::bigint FROM u
        RETURNING id, job_id
      )
      SELECT u.id, u.kind, u.payload, u.progress, u.attempts, u.max_attempts, u.run_at, u.request_id, r.id AS run_id
      FROM u JOIN r ON r.job_id = u.id`;
    return { compile: () => query.compile(db) };
  },
);

export async function claimDue(
  db: Kysely<Database>,
  now: number,
  lease: Lease,
  groups: readonly ClaimGroup[],
  limits: Readonly<Record<string, number>>,
): Promise<ClaimedJob[]> {
  const free = { ...limits };
  const wanted = groups.filter((g) => g.kinds === undefined || g.kinds.length > 0);
  if (!wanted.some((g) => (free[g.pool] ?? 0) > 0)) return [];
  const engine = engineOf(db);
  if (!(engine.writableCtes && engine.rowLocks))
    return transact(db, (trx) => claimGroups(trx, now, lease, wanted, free));

  // PostgreSQL: the known kinds in one statement; kinds a worker does not know (rare: looked
  // for when asked, or when the known kinds are drained) after it, in a transaction of their own.
  const known = wanted.filter((g) => g.kinds !== undefined && (free[g.pool] ?? 0) > 0);
  const of = known.flatMap((g) => g.kinds!.map((kind) => ({ kind, pool: g.pool, limit: free[g.pool]! })));
  const jobs =
    of.length === 0
      ? []
      : claimedJobs(
          await claimKnown(
            db,
            of.map((k) => k.kind),
            of.map((k) => k.pool),
            of.map((k) => k.limit),
            now,
            lease.owner,
            lease.token,
            lease.until,
          ),
          lease.token,
        );
  let drained = wanted.every((g) => g.kinds === undefined || (free[g.pool] ?? 0) > 0);
  for (const job of jobs) {
    const pool = known.find((g) => g.kinds!.includes(job.kind))!.pool;
    free[pool] = free[pool]! - 1;
    if (free[pool] === 0) drained = false;
  }
  const strangers = wanted.filter((g) => g.except !== undefined && (!g.onlyIfDrained || drained));
  if (strangers.length === 0) return jobs;
  try {
    return [...jobs, ...(await transact(db, (trx) => claimGroups(trx, now, lease, strangers, free)))];
  } catch (error) {
    // The known kinds' claim has committed: its jobs are this worker's to run, and the
    // others are looked for again at the next claim.
    if (jobs.length > 0) return jobs;
    throw error;
  }
}

/** A group's due jobs, the first `limit` of its kinds, oldest first (rows locked where claimRows locks them). */
function candidatesOf(db: Executor, now: number, kinds: readonly string[], limit: number) {
  return kinds.length > 1
    ? dueOfEachKind(db, now, kinds, limit)
    : db
        .selectFrom('jobs as candidate')
        .select('candidate.id')
        .where('candidate.kind', '=', kinds[0]!)
        .where('candidate.state', '=', sql.lit('queued'))
        .where('candidate.run_at', '<=', now)
        .orderBy('candidate.run_at')
        .orderBy('candidate.id')
        .limit(limit)
        .$call(engineOf(db).claimRows);
}

/** The columns of a claimed job's row. */
const CLAIMED = ['id', 'kind', 'payload', 'progress', 'attempts', 'max_attempts', 'run_at', 'request_id'] as const;

/** What a claim sets on each job it takes: running, one attempt more, under the claimer's lease. */
const leaseTaken = (owner: string, token: string, until: number) => ({
  state: sql.lit('running' as const),
  attempts: sql<number>`attempts + 1`,
  lease_owner: owner,
  lease_token: token,
  lease_until: until,
});

type SqliteClaim = (db: Executor, ...args: unknown[]) => Promise<ClaimRow[]>;
const sqliteClaims = new Map<number, SqliteClaim>();

/**
 * On SQLite, one group's claim: its due jobs taken by one conditional UPDATE under the write
 * lock, built once per number of kinds and then run with new values (hotQuery). A worker
 * behind a backlog claims every few milliseconds; with this and recordEnd's statements built
 * once, a delivery or an email cost it 7.6% less CPU (docs/performance.md, "Thirty-third
 * pass"). Its arguments: now, limit, owner, token, until, then the kinds.
 */
function sqliteClaimOf(kinds: number): SqliteClaim {
  let claim = sqliteClaims.get(kinds);
  if (!claim) {
    claim = hotQuery<unknown[], ClaimRow>(kinds + 5, (db, ...args) => {
      const [now, limit, owner, token, until, ...of] = args as [number, number, string, string, number, ...string[]];
      return (
        db
          .updateTable('jobs')
          .set(leaseTaken(owner, token, until))
          // Every candidate is queued: one statement reads and writes it under SQLite's write
          // lock. A second `state = 'queued'` here would lead SQLite's planner, without
          // statistics, to walk every queued job in jobs_due and test it against the
          // candidates: milliseconds a claim behind a backlog.
          .where('id', 'in', candidatesOf(db, now, of, limit))
          .returning(CLAIMED)
      );
    });
    sqliteClaims.set(kinds, claim);
  }
  return claim;
}

/**
 * With row locks (PostgreSQL), the candidates are read apart (see SqlEngine.rowLocks), and
 * taken here: each is queued, locked since it was read so.
 */
async function claimLocked(
  trx: Transaction<Database>,
  lease: Lease,
  candidates: { id: number }[],
): Promise<ClaimRow[]> {
  if (candidates.length === 0) return [];
  return trx
    .updateTable('jobs')
    .set(leaseTaken(lease.owner, lease.token, lease.until))
    .where(
      'id',
      'in',
      candidates.map((c) => c.id),
    )
    .returning(CLAIMED)
    .execute();
}

/** A claim group by group, statement by statement, in the transaction trx. */
async function claimGroups(
  trx: Transaction<Database>,
  now: number,
  lease: Lease,
  wanted: readonly ClaimGroup[],
  free: Record<string, number>,
): Promise<ClaimedJob[]> {
  const jobs: ClaimRow[] = [];
  let drained = true;
  for (const group of wanted) {
    const { pool, onlyIfDrained } = group;
    const limit = free[pool] ?? 0;
    if (onlyIfDrained && !drained) continue;
    if (limit <= 0) {
      drained = false;
      continue;
    }
    const { except } = group;
    const kinds =
      except === undefined ? group.kinds : (await kindsInTable(trx)).filter((kind) => !except.includes(kind));
    if (kinds.length === 0) continue;
    const claimed = engineOf(trx).rowLocks
      ? await claimLocked(trx, lease, await candidatesOf(trx, now, kinds, limit).execute())
      : await sqliteClaimOf(kinds.length)(trx, now, limit, lease.owner, lease.token, lease.until, ...kinds);
    free[pool] = limit - claimed.length;
    if (claimed.length === limit) drained = false;
    jobs.push(...claimed);
  }
  if (jobs.length === 0) return [];
  const runs = await trx
    .insertInto('job_runs')
    .values(
      jobs.map((job) => ({
        job_id: job.id,
        attempt: job.attempts,
        worker: lease.owner,
        started_at: now,
        finished_at: null,
        outcome: null,
        error: null,
      })),
    )
    .returning(['id', 'job_id'])
    .execute();
  const runOf = new Map(runs.map((r) => [r.job_id, r.id]));
  return claimedJobs(
    jobs.map((job) => ({ ...job, run_id: runOf.get(job.id)! })),
    lease.token,
  );
}

/**
 * Puts back the jobs whose lease ran out (their worker died or hung) for any worker to
 * take, or fails those that have used every attempt; their open runs are logged as lost.
 */
export async function reclaimExpired(db: Kysely<Database>, now: number): Promise<number[]> {
  // Nearly always there is none: a read keeps every worker from taking SQLite's write lock to find that out.
  const any = await db
    .selectFrom('jobs')
    .select('id')
    .where('state', '=', 'running')
    .where('lease_until', '<', now)
    .limit(1)
    .executeTakeFirst();
  if (!any) return [];
  return transact(db, async (trx) => {
    const stale = trx
      .selectFrom('jobs as stale')
      .select('stale.id')
      .where('stale.state', '=', 'running')
      .where('stale.lease_until', '<', now)
      .limit(100)
      .$call(engineOf(trx).claimRows);
    // With row locks, read apart, as claims are (see SqlEngine.rowLocks).
    const staleIds = engineOf(trx).rowLocks ? (await stale.execute()).map((r) => r.id) : undefined;
    if (staleIds?.length === 0) return [];
    const expired = await trx
      .updateTable('jobs')
      .set((eb) => ({
        state: eb
          .case()
          .when('attempts', '>=', eb.ref('max_attempts'))
          .then(sql.lit<'failed' | 'queued'>('failed'))
          .else(sql.lit<'failed' | 'queued'>('queued'))
          .end(),
        finished_at: eb.case().when('attempts', '>=', eb.ref('max_attempts')).then(now).else(null).end(),
        run_at: now,
        last_error: 'The lease ran out before the run finished (the worker stopped or hung)',
        lease_owner: null,
        lease_token: null,
        lease_until: null,
      }))
      .where('id', 'in', staleIds ?? stale)
      .where('state', '=', 'running')
      .returning('id')
      .execute();
    const ids = expired.map((r) => r.id);
    if (ids.length > 0) {
      await trx
        .updateTable('job_runs')
        .set({ outcome: 'lost', finished_at: now, error: 'The lease ran out before the run finished' })
        .where('job_id', 'in', ids)
        .where('finished_at', 'is', null)
        .execute();
    }
    return ids;
  });
}

/** Saves a checkpoint and extends the lease; false when this run no longer holds the job. */
export async function saveProgress(
  db: Executor,
  jobId: number,
  token: string,
  progress: string,
  leaseUntil: number,
): Promise<boolean> {
  const result = await db
    .updateTable('jobs')
    .set({ progress, lease_until: leaseUntil })
    .where('id', '=', jobId)
    .where('state', '=', 'running')
    .where('lease_token', '=', token)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export type RunEnd =
  | { outcome: 'done' }
  | { outcome: 'failed'; error: string; retryAt: number | null }
  | { outcome: 'interrupted'; error: string };

/** Writes that a handler asked to commit with the end of its run (JobTools.atEnd). */
export type EndWrite = (trx: Transaction<Database>) => Promise<void>;

export interface RunEnding {
  job: ClaimedJob;
  now: number;
  end: RunEnd;
  writes: readonly EndWrite[];
}

/** One run's end, statement by statement (where statements cannot write in a WITH: SQLite). */
async function recordEnd(trx: Transaction<Database>, { job, now, end, writes }: RunEnding): Promise<boolean> {
  // The handler's writes say what its attempt did (a delivery log row): written whether or
  // not the run still holds the job, since the attempt happened either way.
  for (const write of writes) await write(trx);
  const { state, runAt, finishedAt, error, uncounted } = rowEnd({ job, now, end, writes });
  const changed = await endJobRow(trx, job.id, job.token, state, runAt, finishedAt, uncounted, error);
  if (changed.length !== 1) return false;
  await endRunRow(trx, job.runId, end.outcome, now, end.outcome === 'done' ? null : end.error);
  return true;
}

/**
 * recordEnd's two statements, built once (hotQuery): a worker behind a backlog ends a run
 * every millisecond or two. The job's row is fenced by its lease token; a column rowEnd
 * leaves null keeps its value.
 */
const endJobRow = hotQuery(
  7,
  (
    db,
    id: number,
    token: string,
    state: string,
    runAt: number | null,
    finishedAt: number | null,
    uncounted: number,
    error: string | null,
  ) => {
    const query = sql<{ id: number }>`
      UPDATE jobs SET state = ${state}, run_at = coalesce(${runAt}, run_at),
        finished_at = coalesce(${finishedAt}, finished_at), attempts = attempts - ${uncounted},
        last_error = ${error}, lease_owner = NULL, lease_token = NULL, lease_until = NULL
      WHERE id = ${id} AND state = 'running' AND lease_token = ${token}
      RETURNING id`;
    return { compile: () => query.compile(db) };
  },
);

const endRunRow = hotQuery(4, (db, runId: number, outcome: RunEnd['outcome'], now: number, error: string | null) =>
  db.updateTable('job_runs').set({ outcome, finished_at: now, error }).where('id', '=', runId),
);

/**
 * On PostgreSQL, the ends of a batch of runs in one statement: each job's row (fenced by its
 * lease token, as recordEnd's) and, for the jobs whose row it changed, their runs. Two
 * statements a run, sent one after the other, were most of what a worker spent on a
 * delivery: each a round trip, a write to the socket and a wake of the server.
 */
const finishTogether = hotQuery(
  10,
  (
    db,
    ids: number[],
    tokens: string[],
    runIds: number[],
    outcomes: string[],
    states: string[],
    runAts: (number | null)[],
    finishedAts: (number | null)[],
    errors: (string | null)[],
    uncounted: number[],
    endedAts: number[],
  ) => {
    // Runs, not jobs, are what is matched: one batch may end a job's run that lost its lease
    // and the job's newer run, and only the newer one may write (its run row included).
    const query = sql<{ runs: number[] }>`
      WITH e AS (
        SELECT id, token, run_id, outcome, state, run_at, finished_at, error, uncounted, ended_at
        FROM unnest(${ids}::bigint[], ${tokens}::text[], ${runIds}::bigint[], ${outcomes}::text[],
          ${states}::text[], ${runAts}::bigint[], ${finishedAts}::bigint[], ${errors}::text[], ${uncounted}::int[],
          ${endedAts}::bigint[])
          AS e(id, token, run_id, outcome, state, run_at, finished_at, error, uncounted, ended_at)
      ), j AS (
        UPDATE jobs SET state = e.state, run_at = coalesce(e.run_at, jobs.run_at),
          finished_at = coalesce(e.finished_at, jobs.finished_at), attempts = jobs.attempts - e.uncounted,
          last_error = e.error, lease_owner = NULL, lease_token = NULL, lease_until = NULL
        FROM e
        WHERE jobs.id = e.id AND jobs.state = 'running' AND jobs.lease_token = e.token
        RETURNING e.run_id
      ), r AS (
        UPDATE job_runs SET outcome = e.outcome, finished_at = e.ended_at,
          error = CASE WHEN e.outcome = 'done' THEN NULL ELSE e.error END
        FROM e JOIN j ON j.run_id = e.run_id
        WHERE job_runs.id = e.run_id
      )
      SELECT coalesce(array_agg(run_id), '{}') AS runs FROM j`;
    return { compile: () => query.compile(db) };
  },
);

/** What recordEnd sets on a job's row for each outcome, as finishTogether's columns. */
function rowEnd({ end, now }: RunEnding): {
  state: 'done' | 'queued' | 'failed';
  runAt: number | null;
  finishedAt: number | null;
  error: string | null;
  uncounted: number;
} {
  if (end.outcome === 'done') return { state: 'done', runAt: null, finishedAt: now, error: null, uncounted: 0 };
  if (end.outcome === 'interrupted')
    return { state: 'queued', runAt: now, finishedAt: null, error: end.error, uncounted: 1 };
  return end.retryAt === null
    ? { state: 'failed', runAt: null, finishedAt: now, error: end.error, uncounted: 0 }
    : { state: 'queued', runAt: end.retryAt, finishedAt: null, error: end.error, uncounted: 0 };
}

async function recordEndsTogether(db: Executor, endings: readonly RunEnding[]): Promise<boolean[]> {
  const rows = endings.map(rowEnd);
  const [result] = await finishTogether(
    db,
    endings.map((e) => e.job.id),
    endings.map((e) => e.job.token),
    endings.map((e) => e.job.runId),
    endings.map((e) => e.end.outcome),
    rows.map((r) => r.state),
    rows.map((r) => r.runAt),
    rows.map((r) => r.finishedAt),
    rows.map((r) => r.error),
    rows.map((r) => r.uncounted),
    endings.map((e) => e.now),
  );
  const changed = new Set(result!.runs);
  return endings.map((e) => changed.has(e.job.runId));
}

/**
 * Records how a run ended, with the writes its handler left for the end, if the run still
 * holds the job (a run whose lease was taken over changes nothing of the job): done, failed
 * for good, queued again for a retry at retryAt, or, when the worker stopped it, queued again
 * at once without counting the attempt.
 */
export async function finishRun(db: Kysely<Database>, ending: RunEnding): Promise<boolean> {
  const [recorded] = await finishRuns(db, [ending]);
  return recorded!;
}

/**
 * Records the ends of several runs in one transaction (one write instead of one each); for
 * each, whether the run still held its job. If the transaction fails, nothing of it is
 * written: the caller records the runs one by one, so that one bad run fails alone. On
 * PostgreSQL the handlers' writes come first and then one statement ends every run; with no
 * handler writes, that statement runs alone (it is all or nothing by itself).
 */
export async function finishRuns(db: Kysely<Database>, endings: readonly RunEnding[]): Promise<boolean[]> {
  if (engineOf(db).writableCtes) {
    if (endings.every((e) => e.writes.length === 0)) return recordEndsTogether(db, endings);
    return transact(db, async (trx) => {
      for (const { writes } of endings) for (const write of writes) await write(trx);
      return recordEndsTogether(trx, endings);
    });
  }
  return transact(db, async (trx) => {
    const recorded: boolean[] = [];
    for (const ending of endings) recorded.push(await recordEnd(trx, ending));
    return recorded;
  });
}

/** Replaces a job's payload: for handlers that must not leave a secret behind once it is used. */
export async function replacePayload(db: Executor, jobId: number, payload: string): Promise<void> {
  await db.updateTable('jobs').set({ payload }).where('id', '=', jobId).execute();
}

/**
 * Enqueues a job of kind unless one is waiting or running, or one finished within the
 * last `everyMs`: how the worker schedules its recurring chores. Two workers checking at the
 * same moment on PostgreSQL may both insert; chores are idempotent, so that costs a run.
 */
export async function scheduleRecurring(
  db: Executor,
  kind: string,
  now: number,
  everyMs: number,
  maxAttempts: number,
): Promise<boolean> {
  const recent = await db
    .selectFrom('jobs')
    .select('id')
    .where('kind', '=', kind)
    .where((eb) => eb.or([eb('state', 'in', ['queued', 'running']), eb('finished_at', '>', now - everyMs)]))
    .limit(1)
    .executeTakeFirst();
  if (recent) return false;
  await insertJobs(db, [{ kind, payload: '{}', runAt: now, maxAttempts }]);
  return true;
}

/** Deletes finished jobs (their runs go with them) in slices, so no statement holds the write lock long. */
export function deleteFinishedBefore(db: Executor, before: number): Promise<number> {
  return deleteInSlices((limit) =>
    db
      .deleteFrom('jobs')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('jobs as old')
          .select('old.id')
          .where('old.state', 'in', ['done', 'failed'])
          .where('old.finished_at', '<', before)
          .limit(limit),
      )
      .executeTakeFirst(),
  );
}

export interface OutboxKindStats {
  kind: string;
  /** Queued and due now. */
  due: number;
  /** Queued for later (a retry's backoff, a scheduled chore). */
  scheduled: number;
  /** Claimed by a worker. */
  running: number;
  /** Epoch ms of the oldest due job's run_at (0 means as soon as it was written: then its created_at), or null. */
  oldestDueAt: number | null;
}

/**
 * The outbox's depth per kind, for /metrics: per kind (a loose scan finds them), counts of
 * ranges of jobs_kind_due and two index seeks for the oldest due job; finished jobs, however
 * many are kept, are not read. A due job with run_at 0 counts from when it was written.
 */
export async function outboxStats(db: Executor, now: number): Promise<OutboxKindStats[]> {
  const kinds = await kindsInTable(db);
  return Promise.all(kinds.map((kind) => kindStats(db, kind, now)));
}

async function kindStats(db: Executor, kind: string, now: number): Promise<OutboxKindStats> {
  const ofKind = (state: 'queued' | 'running') =>
    db.selectFrom('jobs').where('kind', '=', kind).where('state', '=', state);
  const counted = (q: ReturnType<typeof ofKind>) => q.select((eb) => eb.fn.countAll<number | string>().as('n'));
  const [due, scheduled, running, firstWritten, firstRetried] = await Promise.all([
    counted(ofKind('queued').where('run_at', '<=', now)).executeTakeFirstOrThrow(),
    counted(ofKind('queued').where('run_at', '>', now)).executeTakeFirstOrThrow(),
    counted(ofKind('running')).executeTakeFirstOrThrow(),
    // run_at 0: as soon as written; ids follow the order of writing.
    ofKind('queued').where('run_at', '=', 0).select('created_at').orderBy('id').limit(1).executeTakeFirst(),
    ofKind('queued')
      .where('run_at', '>', 0)
      .where('run_at', '<=', now)
      .select('run_at')
      .orderBy('run_at')
      .limit(1)
      .executeTakeFirst(),
  ]);
  const oldest = [firstWritten?.created_at, firstRetried?.run_at].filter((t) => t !== undefined).map(Number);
  return {
    kind,
    due: Number(due.n),
    scheduled: Number(scheduled.n),
    running: Number(running.n),
    oldestDueAt: oldest.length === 0 ? null : Math.min(...oldest),
  };
}
