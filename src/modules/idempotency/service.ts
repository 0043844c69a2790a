import { createHmac } from 'node:crypto';
import { serviceKey } from '../../crypto/envelope.js';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { transact } from '../../db/transaction.js';
import { AppError, ConflictError, invalid } from '../../errors.js';
import * as repo from './repository.js';

/** How long a key holds its first response. */
export const KEY_LIFETIME_MS = 24 * 3_600_000;
/** A claim older than this whose request never finished (the process died) may be taken over. */
const STALE_CLAIM_MS = 60_000;

export interface StoredResponse {
  status: number;
  body: string;
}

export type IdempotentOutcome<T> = { replayed: true; response: StoredResponse } | { replayed: false; result: T };

/**
 * What a key remembers of its request, to tell a retry from another request. Keyed (an HMAC
 * under a key derived from SECRET_KEY), because the body may be an encrypted form's values:
 * a plain hash would let anyone who reads the database test guesses of them.
 */
export function requestHash(secretKey: string, method: string, path: string, body: unknown): string {
  return createHmac('sha256', serviceKey(secretKey, 'idempotency requests')).update(`${method} ${path}\n${JSON.stringify(body ?? null)}`).digest('hex');
}

/**
 * Runs a request at most once per Idempotency-Key. The key is claimed in a transaction of
 * its own, so that a concurrent retry sees it; run receives a save function to call inside
 * its own write transaction, so that the response is stored together with the change it
 * describes. A failed run releases the key, so the client can retry.
 */
export async function withIdempotencyKey<T>(
  db: Kysely<Database>,
  accountId: number,
  key: string | undefined,
  hash: () => string,
  run: (save: (trx: Transaction<Database>, response: StoredResponse) => Promise<void>) => Promise<T>,
): Promise<IdempotentOutcome<T>> {
  if (key === undefined) return { replayed: false, result: await run(async () => {}) };
  if (key.length === 0 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw invalid('invalid_idempotency_key', 'header.idempotency-key', 'must be 1 to 255 visible ASCII characters');
  }
  const now = Date.now();
  const requestHashValue = hash();
  const inProgress = (cause?: unknown) => new ConflictError('idempotency_in_progress', undefined, { cause });
  const replay = await transact(db, async (trx) => {
    await repo.deleteExpired(trx, accountId, now - KEY_LIFETIME_MS);
    const existing = await repo.findKey(trx, accountId, key);
    if (existing) {
      if (existing.request_hash !== requestHashValue) {
        throw new AppError('idempotency_key_reused');
      }
      if (existing.state === 'done') return { status: existing.response_status!, body: existing.response_body! };
      if (existing.created_at > now - STALE_CLAIM_MS) throw inProgress();
      await repo.deleteKey(trx, accountId, key);
    }
    await repo.insertClaim(trx, accountId, key, requestHashValue, now);
    return undefined;
  }).catch((error: unknown) => {
    // Two first requests at once: the second one's claim meets the first one's.
    throw error instanceof ConflictError && error.code === 'duplicate' ? inProgress(error) : error;
  });
  if (replay) return { replayed: true, response: replay };
  try {
    const result = await run((trx, response) => repo.saveResponse(trx, accountId, key, response.status, response.body));
    return { replayed: false, result };
  } catch (error) {
    await repo.deleteKey(db, accountId, key);
    throw error;
  }
}
