import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { writeLastUsed } from './repository.js';

/**
 * The last use of each personal access token, noted in memory on every request and written
 * to the database every interval in one batched statement, and once more when the process
 * stops: a write per request would double the cost of every read. What the API shows as a
 * token's last use may so lag by up to the interval (TOKEN_USAGE_FLUSH_SECONDS).
 */
export class TokenUsage {
  private pending = new Map<number, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: Kysely<Database>,
    intervalMs: number,
    private readonly onError: (error: unknown) => void,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  record(tokenId: number, at: number): void {
    const known = this.pending.get(tokenId);
    if (known === undefined || known < at) this.pending.set(tokenId, at);
  }

  /** Writes the uses noted since the last flush; on failure they are kept for the next one. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const uses = [...this.pending];
    this.pending = new Map();
    try {
      await writeLastUsed(this.db, uses);
    } catch (error) {
      for (const [tokenId, at] of uses) this.record(tokenId, at);
      this.onError(error);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
