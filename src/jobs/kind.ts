import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { AppContext } from '../context.js';
import type { JobHandler, JobInfo, JobTools } from './types.js';

/** Retry delays: baseMs after the first failure, doubling, at most maxMs (each between half and all of that). */
export interface Backoff {
  baseMs: number;
  maxMs: number;
}

/**
 * Retry delays as a list: the nth failure waits delaysMs[n-1] (the last entry repeats), each
 * moved at random by up to ±jitter of itself, so that retries of many jobs spread out.
 */
export interface RetrySchedule {
  delaysMs: readonly number[];
  /** Between 0 and 1: 0.1 spreads a 5-minute delay over 4.5 to 5.5 minutes. */
  jitter: number;
}

export interface JobKindDefinition<S extends TSchema> {
  /** Stored in each job's row: a kind that may have jobs queued keeps its name. */
  name: string;
  /**
   * The payload's TypeBox schema: the type that enqueue takes and the handler gets, and
   * what the worker checks a stored payload against before it runs the handler. Jobs
   * written by another version of the code may carry properties this one does not know,
   * so object schemas should not refuse additional properties.
   */
  payload: S;
  handler: JobHandler<Static<S>>;
  /** Runs before a job of this kind is marked failed; 5 unless set. */
  maxAttempts?: number;
  /** This kind's retry delays; the worker's (10 s, doubling, at most 1 h) unless set. */
  backoff?: Backoff;
  /** This kind's retry delays as a fixed list, in place of backoff. */
  retrySchedule?: RetrySchedule;
  /**
   * How many jobs of this kind one worker runs at once, in slots of their own beside the
   * WORKER_CONCURRENCY slots that the other kinds share: for kinds that mostly wait on the
   * network (deliveries, sends), which would otherwise hold the shared slots while idle.
   */
  concurrency?: number;
  /**
   * A chore that workers enqueue for themselves (payload `{}`): when none is queued or
   * running and none finished within the last everyMs.
   */
  recurring?: { everyMs: number };
}

export type PayloadCheck<P> = { ok: true; payload: P } | { ok: false; error: string };

/**
 * Everything about one kind of job, made by defineJob: what enqueue takes and what a worker
 * is given the list of. P is the payload's type.
 */
export interface JobKind<P = unknown> {
  readonly name: string;
  readonly payload: TSchema;
  readonly maxAttempts: number;
  readonly backoff: Backoff | undefined;
  readonly retrySchedule: RetrySchedule | undefined;
  readonly recurring: { everyMs: number } | undefined;
  /** Slots of its own in each worker; undefined: it shares WORKER_CONCURRENCY's. */
  readonly concurrency: number | undefined;
  /** A stored payload, parsed from JSON, checked against the schema. */
  check(payload: unknown): PayloadCheck<P>;
  // A method, not a function property, so that a JobKind<P> is also a JobKind<unknown>:
  // the worker only ever passes a handler the payload that its own kind's check let through.
  handler(ctx: AppContext, job: JobInfo<P>, tools: JobTools<P>): Promise<void>;
}

export const DEFAULT_MAX_ATTEMPTS = 5;

const MAX_REPORTED_ERRORS = 3;

function positiveInteger(value: number, what: string, kind: string): number {
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`defineJob ${kind}: ${what} must be a whole number of at least 1, got ${value}`);
  return value;
}

/** One job kind: its name, payload schema, handler and retry policy (the schema is compiled once, here). */
export function defineJob<S extends TSchema>(definition: JobKindDefinition<S>): JobKind<Static<S>> {
  const { name, payload, handler, backoff, retrySchedule, recurring } = definition;
  if (name === '') throw new Error('defineJob: a job kind needs a name');
  const maxAttempts = positiveInteger(definition.maxAttempts ?? DEFAULT_MAX_ATTEMPTS, 'maxAttempts', name);
  if (backoff) {
    positiveInteger(backoff.baseMs, 'backoff.baseMs', name);
    positiveInteger(backoff.maxMs, 'backoff.maxMs', name);
  }
  if (retrySchedule) {
    if (backoff) throw new Error(`defineJob ${name}: give backoff or retrySchedule, not both`);
    if (retrySchedule.delaysMs.length === 0) throw new Error(`defineJob ${name}: retrySchedule.delaysMs is empty`);
    for (const delay of retrySchedule.delaysMs) positiveInteger(delay, 'retrySchedule.delaysMs[]', name);
    if (!(retrySchedule.jitter >= 0 && retrySchedule.jitter < 1))
      throw new Error(`defineJob ${name}: retrySchedule.jitter must be at least 0 and below 1`);
  }
  if (recurring) positiveInteger(recurring.everyMs, 'recurring.everyMs', name);
  const concurrency =
    definition.concurrency === undefined ? undefined : positiveInteger(definition.concurrency, 'concurrency', name);
  const compiled = TypeCompiler.Compile(payload);
  if (recurring && !compiled.Check({}))
    throw new Error(`defineJob ${name}: a recurring kind is enqueued with the payload {}, which its schema refuses`);
  return {
    name,
    payload,
    maxAttempts,
    backoff,
    retrySchedule,
    recurring,
    concurrency,
    handler,
    check(value: unknown): PayloadCheck<Static<S>> {
      if (compiled.Check(value)) return { ok: true, payload: value };
      const problems: string[] = [];
      for (const error of compiled.Errors(value)) {
        problems.push(`payload${error.path}: ${error.message}`);
        if (problems.length === MAX_REPORTED_ERRORS) break;
      }
      return {
        ok: false,
        error: `The payload of this ${name} job does not match its kind's schema (${problems.join('; ')})`,
      };
    },
  };
}

const CHORE_PAYLOAD = Type.Object({});

/**
 * A recurring chore of the worker (pruning, expiring, sweeping): enqueued with the payload {}
 * every `everyMs` by whichever worker looks first (scheduleRecurring), with a few attempts.
 */
export function defineChore(chore: { name: string; everyMs: number; run: (ctx: AppContext) => Promise<unknown> }) {
  return defineJob({
    name: chore.name,
    payload: CHORE_PAYLOAD,
    maxAttempts: 3,
    recurring: { everyMs: chore.everyMs },
    async handler(ctx) {
      await chore.run(ctx);
    },
  });
}
