// Placeholder until the jobs branch is merged (it replaces this file).
import type { Executor } from '../db/transaction.js';

export async function enqueue(_db: Executor, _job: { kind: string; payload: unknown; runAt?: number; maxAttempts?: number }): Promise<number> {
  return 0;
}
