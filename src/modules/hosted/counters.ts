import type { AppContext } from '../../context.js';
import { COUNT_COLUMNS, addCounts, type CountColumn } from './repository.js';

/**
 * The hosted pages' counts (views, starts, partial saves, completions, refusals), added up
 * in process memory and written every STATS_FLUSH_SECONDS as one upsert per form and day:
 * a page view costs no database write. A process that dies loses at most that many seconds
 * of counts, which statistics can bear.
 */
export class PageCounters {
  private pending = new Map<
    string,
    { accountId: number; formId: number; day: string; counts: Record<CountColumn, number> }
  >();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: Pick<AppContext, 'db' | 'clock'>,
    everyMs: number,
    private readonly onError: (error: unknown) => void,
  ) {
    this.timer = setInterval(() => void this.flush(), everyMs);
    this.timer.unref();
  }

  private day = { from: 0, to: -1, name: '' };

  /** The UTC day of now, worked out once a day rather than once a view. */
  private today(): string {
    const now = this.ctx.clock.now();
    if (now < this.day.from || now >= this.day.to) {
      const from = now - (now % 86_400_000);
      this.day = { from, to: from + 86_400_000, name: new Date(from).toISOString().slice(0, 10) };
    }
    return this.day.name;
  }

  add(accountId: number, formId: number, column: CountColumn, by = 1): void {
    const day = this.today();
    const key = `${formId}:${day}`;
    let entry = this.pending.get(key);
    if (!entry) {
      entry = {
        accountId,
        formId,
        day,
        counts: Object.fromEntries(COUNT_COLUMNS.map((c) => [c, 0])) as Record<CountColumn, number>,
      };
      this.pending.set(key, entry);
    }
    entry.counts[column] += by;
  }

  /** Writes what was counted so far (before a read of the statistics, and on close). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const batch = [...this.pending.values()];
      this.pending = new Map();
      for (const e of batch) {
        try {
          await addCounts(this.ctx.db, e.accountId, e.formId, e.day, e.counts);
        } catch (error) {
          this.onError(error);
        }
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
