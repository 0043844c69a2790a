import type { Kysely } from 'kysely';
import { withRequestId } from '../request-context.js';
import type { Database } from './schema.js';
import type { Executor } from './transaction.js';

/**
 * Per kind of shared statement, over the process's life: statements sent, the calls they
 * carried, and calls whose shared statement failed for one of them and that were made again
 * alone (GET /metrics: formwork_db_shared_*); and the calls waiting now (the worker's yield).
 */
export const sharedStatementCounts = new Map<string, SharedCounts>();

export interface SharedCounts {
  statements: number;
  calls: number;
  madeAgain: number;
  /** Calls waiting now: queued, or in a statement out. */
  waiting: number;
}

/** The counts of kind's shared statements, made on first use (read by /metrics). */
export function sharedCountsOf(kind: string): SharedCounts {
  let counts = sharedStatementCounts.get(kind);
  if (!counts) {
    counts = { statements: 0, calls: 0, madeAgain: 0, waiting: 0 };
    sharedStatementCounts.set(kind, counts);
  }
  return counts;
}

/** The calls of every kind waiting now: all are the API's (creates, token look-ups), which the worker yields to. */
export function sharedCallsWaiting(): number {
  let waiting = 0;
  for (const counts of sharedStatementCounts.values()) waiting += counts.waiting;
  return waiting;
}

/** Counts calls of kind that were made again alone after their shared statement failed. */
export function countMadeAgain(kind: string, calls: number): void {
  sharedCountsOf(kind).madeAgain += calls;
}

interface Call<I, O> {
  item: I;
  resolve: (outcome: O) => void;
  reject: (error: unknown) => void;
}

/**
 * Calls of one kind run together: while `inFlight` statements of that kind are out (waiting for
 * a pool connection or running), calls queue, and the next statement takes every call queued by
 * then (up to max), when it gets its connection, and runs them together (run: one outcome per
 * item, in order). An idle process so runs a call at once, alone, and a busy one gathers as
 * many as arrived meanwhile: the batch grows with the load, with no timer on the way. A
 * statement beside others out waits for half of max calls (mayTake), or for one out to end.
 *
 * Why: on PostgreSQL a statement costs the server its round trip, its start and its commit
 * whatever it carries, and the process its turn of the event loop to send it and read the
 * answer; calls that share a statement share those. On a small machine where the server and
 * the process share cores, a few statements in flight also leave the process's one thread a
 * core of its own, where a backend per request took turns with it.
 *
 * A statement out for longer than `slowMs` (waiting for a lock another transaction holds, say)
 * stops counting against inFlight, so that it holds up no other call for longer than that:
 * the pool's size is then what bounds them.
 */
export class Coalescer<I, O> {
  private queue: Call<I, O>[] = [];
  private out = 0;
  private readonly counts: SharedCounts;
  /** What a statement beside another out waits to carry (mayTake). */
  private readonly halfFull: number;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly run: (connection: Executor, items: I[]) => Promise<O[]>,
    private readonly limits: { kind: string; max: number; inFlight: number; slowMs: number },
  ) {
    this.counts = sharedCountsOf(limits.kind);
    this.halfFull = Math.ceil(limits.max / 2);
  }

  call(item: I): Promise<O> {
    this.counts.waiting++;
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      // The statement is every queued call's, not the request's that happened to send it.
      if (this.mayTake()) withRequestId(undefined, () => this.take());
    });
  }

  /**
   * Whether a statement may go out now. With none out, at once, whatever it carries; beside one
   * out, only with at least half a full statement's calls queued. Under load, requests arrive
   * one by one as the answers of the last statement reach their clients: a second statement
   * sent at the first of them carried one call (two statements in five, measured), and the
   * rest waited for the next free one. Held until half are there, statements carry 16 or more
   * calls, and the server spends less on each (docs/performance.md, "Thirty-fifth pass").
   */
  private mayTake(): boolean {
    if (this.queue.length === 0 || this.out >= this.limits.inFlight) return false;
    return this.out === 0 || this.queue.length >= this.halfFull;
  }

  private take(): void {
    this.out++;
    let counted = true;
    const uncount = () => {
      if (!counted) return;
      counted = false;
      this.out--;
      if (this.mayTake()) this.take();
    };
    const slow = setTimeout(uncount, this.limits.slowMs);
    slow.unref();
    let taken: Call<I, O>[] | undefined;
    this.db
      .connection()
      .execute(async (connection) => {
        taken = this.queue.splice(0, this.limits.max);
        if (taken.length === 0) return;
        this.counts.statements++;
        this.counts.calls += taken.length;
        const outcomes = await this.run(
          connection,
          taken.map((c) => c.item),
        );
        this.counts.waiting -= taken.length;
        taken.forEach((c, i) => c.resolve(outcomes[i]!));
      })
      .catch((error: unknown) => {
        // No connection came: the calls that were waiting for one fail with it.
        taken ??= this.queue.splice(0, this.limits.max);
        this.counts.waiting -= taken.length;
        for (const c of taken) c.reject(error);
      })
      .finally(() => {
        clearTimeout(slow);
        uncount();
      });
  }
}

const coalescers = new WeakMap<Kysely<Database>, Map<string, Coalescer<never, unknown>>>();

/** The Coalescer of limits.kind on db, made on its first call: one per database and kind. */
export function sharedStatements<I, O>(
  db: Kysely<Database>,
  run: (connection: Executor, items: I[]) => Promise<O[]>,
  limits: { kind: string; max: number; inFlight: number; slowMs: number },
): Coalescer<I, O> {
  let ofDb = coalescers.get(db);
  if (!ofDb) {
    ofDb = new Map();
    coalescers.set(db, ofDb);
  }
  let coalescer = ofDb.get(limits.kind) as Coalescer<I, O> | undefined;
  if (!coalescer) {
    coalescer = new Coalescer(db, run, limits);
    ofDb.set(limits.kind, coalescer as unknown as Coalescer<never, unknown>);
  }
  return coalescer;
}
