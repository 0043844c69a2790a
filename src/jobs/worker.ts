import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import type { AppContext } from '../context.js';
import type { Backoff, JobKind } from './kind.js';
import { engineOf } from '../db/engine.js';
import { onEnqueue } from './outbox.js';
import {
  claimDue,
  finishRun,
  finishRuns,
  canListenForJobs,
  listenForJobs,
  reclaimExpired,
  replacePayload,
  saveProgress,
  scheduleRecurring,
  type ClaimedJob,
  type EndWrite,
  type RunEnd,
  type RunEnding,
} from './repository.js';
import { holdRequestId, withRequestId } from '../request-context.js';
import { FinalFailure, RetryAt, scheduledDelay } from './retry.js';
import type { JobTools } from './types.js';

/** What the worker logs through: pino (Fastify's app.log in `serve`) fits. */
export interface WorkerLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
  /** Every run's end, when the log takes debug lines (pino does). */
  debug?(details: object, message: string): void;
}

/** The API that shares a worker's process (WorkerOptions.yieldTo). */
export interface YieldTo {
  received(): number;
  waiting?(): number;
}

export interface WorkerOptions {
  /**
   * The kinds this worker runs (the application's list is src/job-kinds.ts); a job of any
   * other kind fails, and is retried in case a worker that knows it takes it.
   */
  kinds: readonly JobKind[];
  /** Defaults: WORKER_POLL_MS, JOB_LEASE_SECONDS and WORKER_CONCURRENCY. */
  pollMs?: number;
  leaseMs?: number;
  concurrency?: number;
  /** How long stop() lets running handlers finish before aborting them (10 s). */
  graceMs?: number;
  /** Retry delays of kinds that set none: baseMs after the first failure, doubling, at most maxMs (10 s and 1 h). */
  backoff?: Backoff;
  log?: WorkerLog;
  /**
   * The API that shares this worker's process (`serve`), by the count of requests it has
   * received so far. While the event loop is nearly always busy and requests keep coming
   * (at least BUSY_REQUESTS in each window: the API saturated, not merely a busy worker), the
   * worker claims a few jobs at a time and pauses between claims, so that a flood of
   * requests is not slowed by the deliveries it causes. Jobs are only delayed: they stay in
   * the outbox, and the worker goes back to full speed as soon as the load drops. A worker
   * process of its own (`formwork worker`) has none and never holds back.
   * waiting: how many of the API's calls wait for a database statement now (PostgreSQL's
   * shared statements); at BUSY_WAITING or more the API counts as saturated too, whatever
   * its loop's share.
   */
  yieldTo?: YieldTo;
  /** Told of every run's end (for metrics): its kind, outcome and how long the handler took. */
  onRun?: (kind: string, outcome: RunEnd['outcome'], seconds: number) => void;
}

export interface Worker {
  /** Names this worker in leases and run logs. */
  readonly id: string;
  /** Polls, and runs due jobs as they come, until stop(). */
  start(): void;
  /**
   * Runs every job that is due now (reclaiming expired leases first) and resolves when
   * none is left and its runs have finished; for tests and tools, on a worker not started.
   */
  runDue(): Promise<number>;
  /**
   * Stops claiming; lets running handlers finish for the grace period, then aborts them.
   * A handler that gives up is put back in the queue at once; one that does not answer
   * keeps its lease and is taken over by another worker when the lease runs out.
   */
  stop(): Promise<void>;
}

/** A claimed job, with when its lease ends by this process's clock (performance.now()). */
type HeldJob = ClaimedJob & { leaseEnds: number };

const SCHEDULE_CHECK_MS = 60 * 1000;
/** A run gives up this long before its lease ends (a tenth of the lease, if that is less). */
const LEASE_MARGIN_MS = 1000;
/** The most often a running worker looks for expired leases: wakes come with every enqueue and every finished run. */
const RECLAIM_EVERY_MS = 1000;
const MAX_ERROR_LENGTH = 2000;
/**
 * How long a wake waits to gather more work before claiming, and a finished run before its end
 * is written: each claim and each batch of ends is a write transaction, and on SQLite's one
 * connection it is the number of those, not their size, that a worker costs the API. Under a
 * flood of enqueues this turns one claim per enqueue into one per window; at low rates it
 * adds at most this to a job's start.
 */
const GATHER_MS = 20;
/**
 * A pool whose claim found jobs due longer ago than this is behind (a backlog), and its freed
 * slots claim without the gather (wake). A worker that keeps up claims its jobs within a gather
 * or two of their due time; being eager then would only split its claims into more, smaller
 * statements.
 */
const BEHIND_MS = 250;
/**
 * yieldTo: the API counts as saturated when the loop was busy this share of the last
 * LOAD_WINDOW_MS and received at least BUSY_REQUESTS requests in it. Received, not in flight:
 * on SQLite a request is mostly answered within the turn of the loop that parsed it, so the
 * worker, which runs between turns, found none in flight even at 1,500 requests a second
 * (docs/performance.md, seventh pass). Not 0.9, as it was: a saturated API's loop now waits
 * for the create thread (SQLite) or for PostgreSQL's shared statements a tenth of the time or
 * more, so it read 0.85–0.9 and the worker, judging it not saturated in most windows, made
 * deliveries that took a tenth of the loop and a quarter of the rate of creates with events
 * (docs/performance.md, thirtieth pass).
 */
const BUSY_UTILIZATION = 0.7;
const LOAD_WINDOW_MS = 100;
const BUSY_REQUESTS = 8;
/**
 * yieldTo: the API also counts as saturated while this many of its calls wait for a database
 * statement. On PostgreSQL a process serving as many creates as its shared statements carry
 * waits for them: its loop was busy 0.7–0.8 of the time beside 30–45 waiting calls (50
 * clients), and in the windows where it read under 0.7 the worker delivered, its deliveries
 * taking a quarter of the creates' rate in those seconds (docs/performance.md, thirty-first
 * pass). Its loop's share also counts the worker's own work, which the waiting calls do not.
 * Sixteen is more than the shared statements carry at a few thousand creates a second.
 */
const BUSY_WAITING = 16;
/**
 * yieldTo, while saturated: at most this many jobs per slot pool in one claim, and this long
 * between claims. A trickle for liveness only (the oldest jobs keep moving): a delivery costs
 * about 2 ms of CPU, and no trickle keeps up with a saturated API's enqueues anyway; at 8 jobs
 * per 250 ms it took about 15% of the API's rate (docs/performance.md, sixth pass).
 */
const BUSY_BATCH = 2;
/** The most runs whose ends may wait to be written (flushEnds writes 64 at a time) before the worker claims again. */
const MAX_PENDING_ENDS = 256;
const BUSY_PAUSE_MS = 500;

class WorkerStopping extends Error {
  constructor() {
    super('The worker stopped before the run finished');
  }
}

/** A stored payload that its kind's schema refuses: no attempt would do better, so the job fails at once. */
class PayloadRefused extends Error {}

class LeaseLost extends Error {
  constructor(jobId: number) {
    super(`Job ${jobId} is no longer held by this run (its lease ran out and it may have been taken over)`);
  }
}

const silentLog: WorkerLog = { info() {}, warn() {}, error() {} };

/** Equal jitter: between half and all of an exponentially growing delay, so retries of many jobs spread out and each delay is longer than the one before. */
export function retryDelay(attempt: number, backoff: Backoff, random = Math.random()): number {
  const ceiling = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.min(attempt - 1, 40));
  return Math.round(ceiling / 2 + (random * ceiling) / 2);
}

function errorMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > MAX_ERROR_LENGTH ? `${message.slice(0, MAX_ERROR_LENGTH)}…` : message;
}

function sleep(ms: number): { promise: Promise<void>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

interface Run {
  jobId: number;
  done: Promise<void>;
  controller: AbortController;
}

class JobWorker implements Worker {
  readonly id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly kinds: ReadonlyMap<string, JobKind>;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly concurrency: number;
  private readonly ownPools: readonly string[];
  private readonly sharedKinds: readonly string[];
  private readonly graceMs: number;
  private readonly backoff: Backoff;
  private readonly log: WorkerLog;
  /**
   * By run id, not job id: a job whose lease ran out while its run was still going can be
   * claimed again and run beside it, and each run's end must take out its own entry.
   */
  private readonly runs = new Map<number, Run>();
  /** Running jobs by slot pool: a kind with a concurrency of its own, or '' for the shared one. */
  private readonly running = new Map<string, number>();
  private started = false;
  private stopping: Promise<void> | undefined;
  private pumping: Promise<void> | undefined;
  private pumpAgain = false;
  /** The next pump that pumpAgain asks for may claim at once (wake's `soon`). */
  private pumpAgainSoon = false;
  /**
   * Pools whose last claim came back with every slot it asked for, with jobs due more than
   * BEHIND_MS before: a backlog, so a slot they free is filled at once where claims are cheap
   * (wake).
   */
  private readonly backlogged = new Set<string>();
  /** PostgreSQL: a claim is one statement on a pooled connection, beside everything else. */
  private readonly claimsAreCheap: boolean;
  private timer: NodeJS.Timeout | undefined;
  private gatherTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private listener: { close(): Promise<void> } | undefined;
  private listening: Promise<void> | undefined;
  private nextScheduleCheck = 0;
  private nextReclaim = 0;
  private ending: { ending: RunEnding; kind: JobKind | undefined; resolve: (recorded: boolean) => void }[] = [];
  private flushingEnds = false;
  /** Ends taken out of `ending` and being written now: they wait too (free()). */
  private endsBeingWritten = 0;
  /** runDue (tests and tools) writes ends at once: nothing else is gathering. */
  private runDueMode = false;
  private readonly yieldTo: YieldTo | undefined;
  private readonly onRun: WorkerOptions['onRun'];
  private loadSample: EventLoopUtilization = performance.eventLoopUtilization();
  private loadSampledAt = performance.now();
  private receivedAtSample = 0;
  private saturated = false;
  private loadTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: AppContext,
    options: WorkerOptions,
  ) {
    const kinds = new Map<string, JobKind>();
    for (const kind of options.kinds) {
      if (kinds.has(kind.name)) throw new Error(`createWorker: two job kinds are named "${kind.name}"`);
      kinds.set(kind.name, kind);
    }
    this.kinds = kinds;
    this.pollMs = options.pollMs ?? ctx.config.workerPollMs;
    this.leaseMs = options.leaseMs ?? ctx.config.jobLeaseSeconds * 1000;
    this.concurrency = options.concurrency ?? ctx.config.workerConcurrency;
    this.ownPools = [...kinds.values()].filter((k) => k.concurrency !== undefined).map((k) => k.name);
    this.sharedKinds = [...kinds.values()].filter((k) => k.concurrency === undefined).map((k) => k.name);
    this.graceMs = options.graceMs ?? 10_000;
    const engine = engineOf(ctx.db);
    this.claimsAreCheap = engine.rowLocks && engine.writableCtes;
    this.backoff = options.backoff ?? { baseMs: 10_000, maxMs: 60 * 60 * 1000 };
    this.log = options.log ?? silentLog;
    this.yieldTo = options.yieldTo;
    this.onRun = options.onRun;
  }

  /** yieldTo: whether the API is saturated, as of the last reading (sampleLoad). */
  private underLoad(): boolean {
    return this.yieldTo !== undefined && this.saturated;
  }

  /**
   * yieldTo: reads the loop's business and the requests received since the last reading
   * (every LOAD_WINDOW_MS while started, or later when the loop is late). On its own timer
   * rather than when the worker looks for work: an idle worker's first look would otherwise
   * judge a window as long as its idleness (a burst minutes ago held it back then).
   */
  private sampleLoad(): void {
    if (!this.yieldTo) return;
    const now = performance.now();
    const elapsed = now - this.loadSampledAt;
    const current = performance.eventLoopUtilization();
    const received = this.yieldTo.received();
    const was = this.saturated;
    this.saturated =
      (performance.eventLoopUtilization(current, this.loadSample).utilization >= BUSY_UTILIZATION &&
        received - this.receivedAtSample >= (BUSY_REQUESTS * elapsed) / LOAD_WINDOW_MS) ||
      (this.yieldTo.waiting?.() ?? 0) >= BUSY_WAITING;
    this.loadSample = current;
    this.receivedAtSample = received;
    this.loadSampledAt = now;
    // The load is gone: a look for work paused for it (BUSY_PAUSE_MS) happens now.
    if (was && !this.saturated && this.gatherTimer !== undefined) this.pumpNow();
  }

  start(): void {
    if (this.started || this.stopping) return;
    this.started = true;
    if (this.yieldTo) {
      this.sampleLoad();
      this.loadTimer = setInterval(() => this.sampleLoad(), LOAD_WINDOW_MS);
      this.loadTimer.unref();
    }
    this.unsubscribe = onEnqueue(() => this.wake());
    this.pumpNow();
  }

  async runDue(): Promise<number> {
    this.runDueMode = true;
    let count = 0;
    for (;;) {
      await this.housekeeping(true);
      const jobs = this.stopping ? [] : await this.claim(true, this.rooms(false));
      for (const job of jobs) this.launch(job);
      count += jobs.length;
      if (this.runs.size === 0 && jobs.length === 0) return count;
      if (this.runs.size > 0) await Promise.race([...this.runs.values()].map((r) => r.done));
    }
  }

  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    clearInterval(this.loadTimer);
    clearTimeout(this.timer);
    clearTimeout(this.gatherTimer);
    this.unsubscribe?.();
    await this.listening;
    await this.listener?.close();
    await this.pumping;
    if (this.runs.size === 0) return;
    const settled = () => Promise.allSettled([...this.runs.values()].map((r) => r.done));
    const grace = sleep(this.graceMs);
    await Promise.race([settled(), grace.promise]);
    grace.cancel();
    if (this.runs.size === 0) return;
    this.log.warn(
      { worker: this.id, jobs: [...this.runs.values()].map((r) => r.jobId) },
      'worker stopping: aborting the jobs still running',
    );
    for (const run of this.runs.values()) run.controller.abort(new WorkerStopping());
    // A handler that ignores its signal is left behind; its lease brings the job back.
    const answer = sleep(Math.min(this.graceMs, 5000));
    await Promise.race([settled(), answer.promise]);
    answer.cancel();
  }

  /**
   * Looks for work soon (after GATHER_MS, so that one claim takes what arrived meanwhile);
   * called by enqueues, by notifications and when a run ends. `soon`: a slot of a pool with a
   * backlog is free (`backlogged`), and on PostgreSQL the claim goes at once rather than after
   * the gather, which there only left the slot idle: with 10 email slots and 7 ms a send, the
   * 20 ms gather held a worker draining a backlog to 380 emails a second, three quarters idle
   * (docs/performance.md, fourteenth pass). On SQLite a claim is a write on the one connection
   * the API shares, and the gather stays.
   */
  private wake(soon = false): void {
    if (!this.started || this.stopping) return;
    const now = soon && this.claimsAreCheap && !this.underLoad();
    if (this.pumping) {
      this.pumpAgain = true;
      this.pumpAgainSoon ||= now;
      return;
    }
    if (this.gatherTimer !== undefined) {
      if (!now) return;
      clearTimeout(this.gatherTimer);
    }
    this.gatherTimer = setTimeout(
      () => {
        this.gatherTimer = undefined;
        this.pumpNow();
      },
      now ? 0 : this.underLoad() ? BUSY_PAUSE_MS : GATHER_MS,
    );
  }

  /** Looks for work now: at start and on the poll timer. */
  private pumpNow(): void {
    if (!this.started || this.stopping) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    clearTimeout(this.timer);
    clearTimeout(this.gatherTimer);
    this.gatherTimer = undefined;
    this.pumping = this.pump()
      .catch((error: unknown) =>
        this.log.error({ worker: this.id, err: error }, 'worker could not claim jobs; trying again at the next poll'),
      )
      .finally(() => {
        this.pumping = undefined;
        if (this.stopping) return;
        if (this.pumpAgain) {
          const soon = this.pumpAgainSoon;
          this.pumpAgain = false;
          this.pumpAgainSoon = false;
          this.wake(soon);
        } else {
          this.timer = setTimeout(() => this.pumpNow(), this.pollMs);
        }
      });
  }

  private async pump(): Promise<void> {
    // The load as it was when the work came, before this pump's own waits.
    let saturated = this.underLoad();
    // Listening before the first claim: no commit between that claim and the LISTEN goes unnoticed.
    if (canListenForJobs(this.ctx.db) && !this.listener) await (this.listening ??= this.listen());
    let strangers = await this.housekeeping(false);
    // Claiming until full: a batch may come back short while jobs keep being enqueued.
    while (!this.stopping) {
      const asked = this.rooms(saturated);
      const jobs = await this.claim(strangers, asked);
      strangers = false;
      const got = new Map<string, number>();
      const behind = new Set<string>();
      const late = this.ctx.clock.now() - BEHIND_MS;
      for (const job of jobs) {
        const pool = this.poolOf(job.kind);
        got.set(pool, (got.get(pool) ?? 0) + 1);
        if (job.dueAt < late) behind.add(pool);
        this.launch(job);
      }
      // A pool that asked for nothing learnt nothing: what an earlier claim found stands.
      for (const [pool, room] of Object.entries(asked)) {
        if (room === 0) continue;
        if ((got.get(pool) ?? 0) >= room && behind.has(pool)) this.backlogged.add(pool);
        else this.backlogged.delete(pool);
      }
      if (jobs.length === 0 || this.full()) return;
      // Saturated: one small claim, then a look again after a pause (wake() counts it).
      if (saturated) {
        this.pumpAgain = true;
        return;
      }
      saturated = this.underLoad();
    }
  }

  /** On PostgreSQL, a LISTEN connection wakes the worker when any process commits an enqueue; without it, polling still finds the jobs. */
  private async listen(): Promise<void> {
    try {
      this.listener = await listenForJobs(
        this.ctx.db,
        () => this.wake(),
        (error) => {
          this.log.warn({ worker: this.id, err: error }, 'job notifications lost; reconnecting at the next poll');
          const lost = this.listener;
          this.listener = undefined;
          void lost?.close();
        },
      );
      if (this.stopping) await this.listener?.close();
    } catch (error) {
      this.log.warn({ worker: this.id, err: error }, 'could not listen for job notifications; polling only');
    } finally {
      this.listening = undefined;
    }
  }

  /**
   * Reclaims expired leases (always when asked, else at most once a second) and schedules
   * recurring chores; whether it reclaimed, which is when the claim looks for unknown kinds too.
   */
  private async housekeeping(always: boolean): Promise<boolean> {
    const now = this.ctx.clock.now();
    const reclaim = always || now >= this.nextReclaim || now < this.nextReclaim - RECLAIM_EVERY_MS;
    if (reclaim) {
      this.nextReclaim = now + RECLAIM_EVERY_MS;
      const reclaimed = await reclaimExpired(this.ctx.db, now);
      if (reclaimed.length > 0)
        this.log.warn({ worker: this.id, jobs: reclaimed }, 'took back jobs whose lease ran out');
    }
    if (now >= this.nextScheduleCheck) {
      this.nextScheduleCheck = now + SCHEDULE_CHECK_MS;
      for (const kind of this.kinds.values()) {
        if (kind.recurring)
          await scheduleRecurring(this.ctx.db, kind.name, now, kind.recurring.everyMs, kind.maxAttempts);
      }
    }
    return reclaim;
  }

  private poolOf(kind: string): string {
    return this.kinds.get(kind)?.concurrency === undefined ? '' : kind;
  }

  private free(pool: string): number {
    // Runs whose ends wait to be written hold no slot; past this many, the database is
    // behind, and claiming more would only lengthen the wait.
    if (this.ending.length + this.endsBeingWritten >= MAX_PENDING_ENDS) return 0;
    const limit = pool === '' ? this.concurrency : this.kinds.get(pool)!.concurrency!;
    return limit - (this.running.get(pool) ?? 0);
  }

  private full(): boolean {
    return this.free('') <= 0 && this.ownPools.every((pool) => this.free(pool) <= 0);
  }

  /** The slots each pool may fill in the next claim. */
  private rooms(saturated: boolean): Record<string, number> {
    const room = (pool: string) => (saturated ? Math.min(this.free(pool), BUSY_BATCH) : this.free(pool));
    const limits: Record<string, number> = { '': room('') };
    for (const pool of this.ownPools) limits[pool] = room(pool);
    return limits;
  }

  /**
   * As many due jobs as there are free slots, in one transaction. Each pool names its kinds,
   * so that its query finds them by index instead of reading past a backlog of other kinds.
   * Jobs of kinds this worker does not know go to the shared slots, to fail there and be
   * retried; looking for them reads every due job, so only when the known kinds have no
   * backlog, or with housekeeping (`strangers`, at most once a second).
   */
  private async claim(strangers: boolean, limits: Record<string, number>): Promise<HeldJob[]> {
    // Read before the lease's end is computed and written: it ends no sooner than this + leaseMs.
    const leaseEnds = performance.now() + this.leaseMs;
    const now = this.ctx.clock.now();
    const lease = { owner: this.id, token: randomBytes(16).toString('hex'), until: now + this.leaseMs };
    const jobs = await claimDue(
      this.ctx.db,
      now,
      lease,
      [
        { kinds: this.sharedKinds, pool: '' },
        ...this.ownPools.map((pool) => ({ kinds: [pool], pool })),
        { except: [...this.kinds.keys()], pool: '', onlyIfDrained: !strangers },
      ],
      limits,
    );
    return jobs.map((job) => ({ ...job, leaseEnds }));
  }

  /**
   * Records the end of a run together with the ends of the runs that finish in the same turn
   * of the event loop: one transaction for all of them. If that fails, each is recorded alone,
   * and a run whose own writes fail is recorded as a failed attempt without them.
   */
  private recordEnd(ending: RunEnding, kind: JobKind | undefined): Promise<boolean> {
    return new Promise((resolve) => {
      this.ending.push({ ending, kind, resolve });
      if (!this.flushingEnds) {
        this.flushingEnds = true;
        // A run that ends waits for those that end soon after it: their ends share one transaction.
        if (this.runDueMode) setImmediate(() => void this.flushEnds());
        else setTimeout(() => void this.flushEnds(), GATHER_MS);
      }
    });
  }

  private async flushEnds(): Promise<void> {
    while (this.ending.length > 0) {
      const batch = this.ending.splice(0, 64);
      this.endsBeingWritten = batch.length;
      let recorded: boolean[] | undefined;
      try {
        recorded = await finishRuns(
          this.ctx.db,
          batch.map((b) => b.ending),
        );
      } catch {
        recorded = undefined;
      }
      for (const [i, item] of batch.entries()) item.resolve(recorded ? recorded[i]! : await this.recordAlone(item));
      this.endsBeingWritten = 0;
    }
    this.flushingEnds = false;
  }

  private async recordAlone({ ending, kind }: { ending: RunEnding; kind: JobKind | undefined }): Promise<boolean> {
    const { job } = ending;
    try {
      return await finishRun(this.ctx.db, ending);
    } catch (error) {
      if (ending.writes.length === 0) {
        // The lease brings the job back if its end cannot be written (the database is gone).
        this.log.error(
          { worker: this.id, job: job.id, requestId: job.request_id ?? undefined, err: error },
          'could not record the end of a job run',
        );
        return true;
      }
      const message = `could not write what the run did: ${errorMessage(error)}`;
      const now = this.ctx.clock.now();
      const final = job.attempts >= job.max_attempts;
      const end: RunEnd = {
        outcome: 'failed',
        error: message,
        retryAt: final ? null : this.nextAttemptAt(kind, job.attempts, error, now),
      };
      this.log.warn(
        { worker: this.id, job: job.id, kind: job.kind, requestId: job.request_id ?? undefined, err: error },
        'job failed: its end writes failed',
      );
      return this.recordAlone({ ending: { job, now, end, writes: [] }, kind });
    }
  }

  private launch(job: HeldJob): void {
    const controller = new AbortController();
    const pool = this.poolOf(job.kind);
    this.running.set(pool, (this.running.get(pool) ?? 0) + 1);
    // The slot is free once the handler returns: its end is written with others' (recordEnd),
    // up to GATHER_MS later, and meanwhile the slot takes the next job. The run is not over
    // until its end is written (stop() waits for it), and the job stays leased until then.
    let slotHeld = true;
    const freeSlot = () => {
      if (!slotHeld) return;
      slotHeld = false;
      this.running.set(pool, this.running.get(pool)! - 1);
      this.wake(this.backlogged.has(pool));
    };
    const done = this.execute(job, controller, freeSlot).finally(() => {
      this.runs.delete(job.runId);
      freeSlot();
      this.wake();
    });
    this.runs.set(job.runId, { jobId: job.id, done, controller });
  }

  /** When a failed attempt is tried again: the handler's own time (RetryAt), else its kind's schedule or backoff. */
  private nextAttemptAt(kind: JobKind | undefined, attempt: number, error: unknown, now: number): number {
    if (error instanceof RetryAt) return Math.max(error.at, now);
    if (kind?.retrySchedule) return now + scheduledDelay(attempt, kind.retrySchedule);
    return now + retryDelay(attempt, kind?.backoff ?? this.backoff);
  }

  private async execute(job: HeldJob, controller: AbortController, handlerDone: () => void): Promise<void> {
    // The handler runs under the request id of the request that enqueued the job, so that
    // what it enqueues carries it too.
    const requestId = job.request_id ?? undefined;
    const release = requestId === undefined ? undefined : holdRequestId();
    try {
      await withRequestId(requestId, () => this.executeRun(job, controller, handlerDone));
    } finally {
      release?.();
    }
  }

  private async executeRun(job: HeldJob, controller: AbortController, handlerDone: () => void): Promise<void> {
    const { ctx, leaseMs } = this;
    const requestId = job.request_id ?? undefined;
    const started = performance.now();
    const { signal } = controller;
    // The lease is the longest a handler may go without a checkpoint: past it, another
    // worker may take the job, so this run is told to give up before its lease in the
    // database ends (timed from before the lease's end was written, by a margin for a late
    // timer on a busy loop and for the other workers' clocks).
    const margin = Math.min(LEASE_MARGIN_MS, leaseMs / 10);
    let leaseTimer: NodeJS.Timeout | undefined;
    const holdLease = (ends: number) => {
      clearTimeout(leaseTimer);
      leaseTimer = setTimeout(
        () => controller.abort(new LeaseLost(job.id)),
        Math.max(0, ends - margin - performance.now()),
      );
    };
    holdLease(job.leaseEnds);
    const writes: EndWrite[] = [];
    const tools: JobTools = {
      signal,
      async checkpoint(progress: unknown, db = ctx.db) {
        signal.throwIfAborted();
        const ends = performance.now() + leaseMs;
        const saved = await saveProgress(
          db,
          job.id,
          job.token,
          JSON.stringify(progress ?? null),
          ctx.clock.now() + leaseMs,
        );
        if (!saved) {
          const lost = new LeaseLost(job.id);
          controller.abort(lost);
          throw lost;
        }
        holdLease(ends);
      },
      async replacePayload(payload: unknown, db = ctx.db) {
        await replacePayload(db, job.id, JSON.stringify(payload ?? null));
      },
      atEnd(write: EndWrite) {
        writes.push(write);
      },
    };

    // One time for the end of the run: the retry delay is counted from when it is logged.
    let ended: number | undefined;
    const endedAt = () => (ended ??= ctx.clock.now());
    const kind = this.kinds.get(job.kind);
    let end: RunEnd;
    try {
      if (!kind) throw new Error(`No handler for job kind "${job.kind}"`);
      const checked = kind.check(JSON.parse(job.payload));
      if (!checked.ok) throw new PayloadRefused(checked.error);
      const progress: unknown = job.progress === null ? undefined : JSON.parse(job.progress);
      await kind.handler(
        ctx,
        { id: job.id, kind: job.kind, payload: checked.payload, progress, attempt: job.attempts },
        tools,
      );
      end = { outcome: 'done' };
    } catch (error) {
      const message = errorMessage(error);
      if (signal.aborted && signal.reason instanceof WorkerStopping) {
        end = { outcome: 'interrupted', error: signal.reason.message };
      } else {
        const declared = error instanceof FinalFailure;
        const final = declared || error instanceof PayloadRefused || job.attempts >= job.max_attempts;
        const retryAt = final ? null : this.nextAttemptAt(kind, job.attempts, error, endedAt());
        end = { outcome: 'failed', error: message, retryAt };
        const details = { worker: this.id, job: job.id, kind: job.kind, attempt: job.attempts, requestId, err: error };
        // A handler that says its job cannot succeed has handled what happened; the others are news.
        if (declared) this.log.warn(details, 'job failed for good, as its handler said');
        else if (retryAt === null) this.log.error(details, 'job failed for good');
        else this.log.warn({ ...details, retryAt: new Date(retryAt).toISOString() }, 'job failed; it will be retried');
      }
    } finally {
      clearTimeout(leaseTimer);
    }

    handlerDone();
    const seconds = (performance.now() - started) / 1000;
    this.onRun?.(job.kind, end.outcome, seconds);
    this.log.debug?.(
      { worker: this.id, job: job.id, kind: job.kind, attempt: job.attempts, outcome: end.outcome, seconds, requestId },
      'job run ended',
    );
    const recorded = await this.recordEnd({ job, now: endedAt(), end, writes }, kind);
    if (!recorded)
      this.log.warn(
        { worker: this.id, job: job.id, kind: job.kind, outcome: end.outcome, requestId },
        'job run ended after its lease was taken over; its outcome is not recorded',
      );
  }
}

/** A worker that does nothing until start() or runDue(). */
export function createWorker(ctx: AppContext, options: WorkerOptions): Worker {
  return new JobWorker(ctx, options);
}

/** A worker that polls and runs jobs until stopped. */
export function startWorker(ctx: AppContext, options: WorkerOptions): Worker {
  const worker = createWorker(ctx, options);
  worker.start();
  return worker;
}
