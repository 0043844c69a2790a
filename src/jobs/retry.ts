import type { RetrySchedule } from './kind.js';

/**
 * Thrown by a handler whose attempt failed and that knows when the next one should be (a
 * receiver's Retry-After): the worker retries at `at` (epoch ms of ctx.clock) instead of
 * its kind's delay, if attempts are left. The attempt counts like any other failure.
 */
export class RetryAt extends Error {
  constructor(
    message: string,
    readonly at: number,
  ) {
    super(message);
    this.name = 'RetryAt';
  }
}

/**
 * Thrown by a handler whose attempt failed in a way that every later attempt would too (a
 * template past its limits, an event of a form deleted since): the job is failed at once,
 * with the message, whatever attempts it has left, rather than retried to the same end.
 */
export class FinalFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FinalFailure';
  }
}

/** The delay after the attempt-th failure of a kind with a retry schedule: its entry (the last repeats), ±jitter. */
export function scheduledDelay(attempt: number, schedule: RetrySchedule, random = Math.random()): number {
  const { delaysMs, jitter } = schedule;
  const base = delaysMs[Math.max(1, Math.min(attempt, delaysMs.length)) - 1]!;
  return Math.round(base * (1 - jitter + 2 * jitter * random));
}
