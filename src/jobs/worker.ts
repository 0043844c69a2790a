import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { AppContext } from '../context.js';
import type { Backoff, JobKind } from './kind.js';
import { onEnqueue } from './outbox.js';
import {
  claimNext,
  finishRun,
  listenForJobs,
  reclaimExpired,
  replacePayload,
  saveProgress,
  scheduleRecurring,
  type ClaimedJob,
  type RunEnd,
} from './repository.js';
import type { JobTools } from './types.js';

/** What the worker logs through: pino (Fastify's app.log in `serve`) fits. */
export interface WorkerLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
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

const SCHEDULE_CHECK_MS = 60 * 1000;
const MAX_ERROR_LENGTH = 2000;

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
  done: Promise<void>;
  controller: AbortController;
}

class JobWorker implements Worker {
  readonly id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly kinds: ReadonlyMap<string, JobKind>;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly concurrency: number;
  private readonly graceMs: number;
  private readonly backoff: Backoff;
  private readonly log: WorkerLog;
  private readonly runs = new Map<number, Run>();
  private started = false;
  private stopping: Promise<void> | undefined;
  private pumping: Promise<void> | undefined;
  private pumpAgain = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private listener: { close(): Promise<void> } | undefined;
  private listening: Promise<void> | undefined;
  private nextScheduleCheck = 0;

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
    this.graceMs = options.graceMs ?? 10_000;
    this.backoff = options.backoff ?? { baseMs: 10_000, maxMs: 60 * 60 * 1000 };
    this.log = options.log ?? silentLog;
  }

  start(): void {
    if (this.started || this.stopping) return;
    this.started = true;
    this.unsubscribe = onEnqueue(() => this.wake());
    this.wake();
  }

  async runDue(): Promise<number> {
    let count = 0;
    for (;;) {
      await this.housekeeping();
      let claimed = false;
      while (!this.stopping && this.runs.size < this.concurrency) {
        const job = await this.claim();
        if (!job) break;
        this.launch(job);
        claimed = true;
        count++;
      }
      if (this.runs.size === 0 && !claimed) return count;
      if (this.runs.size > 0) await Promise.race([...this.runs.values()].map((r) => r.done));
    }
  }

  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    clearTimeout(this.timer);
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
    this.log.warn({ worker: this.id, jobs: [...this.runs.keys()] }, 'worker stopping: aborting the jobs still running');
    for (const run of this.runs.values()) run.controller.abort(new WorkerStopping());
    // A handler that ignores its signal is left behind; its lease brings the job back.
    const answer = sleep(Math.min(this.graceMs, 5000));
    await Promise.race([settled(), answer.promise]);
    answer.cancel();
  }

  /** Looks for work now; called by the poll timer, by enqueues, by notifications and when a run ends. */
  private wake(): void {
    if (!this.started || this.stopping) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    clearTimeout(this.timer);
    this.pumping = this.pump()
      .catch((error: unknown) =>
        this.log.error({ worker: this.id, err: error }, 'worker could not claim jobs; trying again at the next poll'),
      )
      .finally(() => {
        this.pumping = undefined;
        if (this.stopping) return;
        if (this.pumpAgain) {
          this.pumpAgain = false;
          this.wake();
        } else {
          this.timer = setTimeout(() => this.wake(), this.pollMs);
        }
      });
  }

  private async pump(): Promise<void> {
    // Listening before the first claim: no commit between that claim and the LISTEN goes unnoticed.
    if (this.ctx.dialect === 'postgres' && !this.listener) await (this.listening ??= this.listen());
    await this.housekeeping();
    while (!this.stopping && this.runs.size < this.concurrency) {
      const job = await this.claim();
      if (!job) return;
      this.launch(job);
    }
  }

  /** On PostgreSQL, a LISTEN connection wakes the worker when any process commits an enqueue; without it, polling still finds the jobs. */
  private async listen(): Promise<void> {
    const url = this.ctx.config.databaseUrl;
    if (!url) return;
    try {
      this.listener = await listenForJobs(
        url,
        () => this.wake(),
        (error) => {
          this.log.warn({ worker: this.id, err: error }, 'job notifications lost; reconnecting at the next poll');
          const lost = this.listener;
          this.listener = undefined;
          void lost?.close();
        },
      );
      if (this.stopping) await this.listener.close();
    } catch (error) {
      this.log.warn({ worker: this.id, err: error }, 'could not listen for job notifications; polling only');
    } finally {
      this.listening = undefined;
    }
  }

  private async housekeeping(): Promise<void> {
    const now = this.ctx.clock.now();
    const reclaimed = await reclaimExpired(this.ctx.db, this.ctx.dialect, now);
    if (reclaimed.length > 0) this.log.warn({ worker: this.id, jobs: reclaimed }, 'took back jobs whose lease ran out');
    if (now >= this.nextScheduleCheck) {
      this.nextScheduleCheck = now + SCHEDULE_CHECK_MS;
      for (const kind of this.kinds.values()) {
        if (kind.recurring)
          await scheduleRecurring(this.ctx.db, kind.name, now, kind.recurring.everyMs, kind.maxAttempts);
      }
    }
  }

  private claim(): Promise<ClaimedJob | undefined> {
    const now = this.ctx.clock.now();
    return claimNext(this.ctx.db, this.ctx.dialect, now, {
      owner: this.id,
      token: randomBytes(16).toString('hex'),
      until: now + this.leaseMs,
    });
  }

  private launch(job: ClaimedJob): void {
    const controller = new AbortController();
    const done = this.execute(job, controller).finally(() => {
      this.runs.delete(job.id);
      this.wake();
    });
    this.runs.set(job.id, { done, controller });
  }

  private async execute(job: ClaimedJob, controller: AbortController): Promise<void> {
    const { ctx, leaseMs } = this;
    const { signal } = controller;
    // The lease is the longest a handler may go without a checkpoint: past it, another
    // worker may take the job, so this run is told to give up.
    let leaseTimer: NodeJS.Timeout | undefined;
    const holdLease = () => {
      clearTimeout(leaseTimer);
      leaseTimer = setTimeout(() => controller.abort(new LeaseLost(job.id)), leaseMs);
    };
    holdLease();
    const tools: JobTools = {
      signal,
      async checkpoint(progress: unknown, db = ctx.db) {
        signal.throwIfAborted();
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
        holdLease();
      },
      async replacePayload(payload: unknown, db = ctx.db) {
        await replacePayload(db, job.id, JSON.stringify(payload ?? null));
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
        const final = error instanceof PayloadRefused || job.attempts >= job.max_attempts;
        const retryAt = final ? null : endedAt() + retryDelay(job.attempts, kind?.backoff ?? this.backoff);
        end = { outcome: 'failed', error: message, retryAt };
        const details = { worker: this.id, job: job.id, kind: job.kind, attempt: job.attempts, err: error };
        if (retryAt === null) this.log.error(details, 'job failed for good');
        else this.log.warn({ ...details, retryAt: new Date(retryAt).toISOString() }, 'job failed; it will be retried');
      }
    } finally {
      clearTimeout(leaseTimer);
    }

    try {
      const recorded = await finishRun(ctx.db, job, endedAt(), end);
      if (!recorded)
        this.log.warn(
          { worker: this.id, job: job.id, kind: job.kind, outcome: end.outcome },
          'job run ended after its lease was taken over; its outcome is not recorded',
        );
    } catch (error) {
      // The lease brings the job back if its end cannot be written (the database is gone).
      this.log.error({ worker: this.id, job: job.id, err: error }, 'could not record the end of a job run');
    }
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
