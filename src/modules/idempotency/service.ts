import { createHmac, randomBytes } from 'node:crypto';
import { serviceKey } from '../../crypto/envelope.js';
import type { Transaction } from 'kysely';
import type { AppContext } from '../../context.js';
import type { Database } from '../../db/schema.js';
import { transact } from '../../db/transaction.js';
import { AppError, ConflictError, invalid, RetryLaterError } from '../../errors.js';
import * as repo from './repository.js';

/** How long a key holds its first response. */
export const KEY_LIFETIME_MS = 24 * 3_600_000;
/**
 * Claims made before claims named their process: taken over once this old, as they all
 * were then. A claim that names its process is taken over as soon as that process has
 * stopped (see modules/processes), and never while it runs.
 */
const LEGACY_STALE_CLAIM_MS = 60_000;
/** What a 409 idempotency_in_progress asks the client to wait before it retries with the same key. */
export const IN_PROGRESS_RETRY_AFTER_SECONDS = 1;

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
  let text: string;
  try {
    text = JSON.stringify(body ?? null);
  } catch (error) {
    // A body nested thousands deep (JSON.parse takes more depth than JSON.stringify gives
    // back): refused as the checks after this would refuse it, not a 500.
    if (error instanceof RangeError) throw invalid('invalid_request', 'body', 'is nested too deeply');
    throw error;
  }
  return createHmac('sha256', serviceKey(secretKey, 'idempotency requests'))
    .update(`${method} ${path}\n${text}`)
    .digest('hex');
}

const inProgress = (cause?: unknown) =>
  new RetryLaterError('idempotency_in_progress', IN_PROGRESS_RETRY_AFTER_SECONDS, undefined, { cause });

/**
 * Runs a request at most once per Idempotency-Key. The key is claimed in a transaction of
 * its own, so that a concurrent retry sees it, and the claim names this process: a retry
 * that meets a claim whose process has stopped (killed, crashed) takes it over at once,
 * while one that meets a running request gets 409 with Retry-After. run receives a save
 * function to call inside its own write transaction, so that the response is stored
 * together with the change it describes (none without a key: nothing to store); save
 * fails (and so rolls the change back) if the claim was taken over meanwhile, so a request
 * judged stopped that was not cannot make a second change. A failed run releases the key,
 * so the client can retry.
 */
export async function withIdempotencyKey<T>(
  ctx: Pick<AppContext, 'db' | 'presence' | 'clock'>,
  accountId: number,
  key: string | undefined,
  hash: () => string,
  run: (save?: (trx: Transaction<Database>, response: StoredResponse) => Promise<void>) => Promise<T>,
): Promise<IdempotentOutcome<T>> {
  if (key === undefined) return { replayed: false, result: await run() };
  if (key.length === 0 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw invalid('invalid_idempotency_key', 'header.idempotency-key', 'must be 1 to 255 visible ASCII characters');
  }
  const { db, presence } = ctx;
  const now = ctx.clock.now();
  const requestHashValue = hash();
  const claim: repo.Claim = { owner: presence.id, token: randomBytes(16).toString('hex') };
  const replay = await transact(db, async (trx) => {
    await repo.deleteExpired(trx, accountId, now - KEY_LIFETIME_MS);
    const existing = await repo.findKey(trx, accountId, key);
    if (!existing) {
      await repo.insertClaim(trx, accountId, key, requestHashValue, claim, now);
      return undefined;
    }
    if (existing.request_hash !== requestHashValue) {
      throw new AppError('idempotency_key_reused');
    }
    if (existing.state === 'done') return { status: existing.response_status!, body: existing.response_body! };
    const abandoned =
      existing.owner === null
        ? existing.created_at <= now - LEGACY_STALE_CLAIM_MS
        : (await presence.stopped([existing.owner], trx)).has(existing.owner);
    if (!abandoned || !(await repo.takeOverClaim(trx, accountId, key, existing.token, claim, now))) throw inProgress();
    return undefined;
  }).catch((error: unknown) => {
    // Two first requests at once: the second one's claim meets the first one's.
    throw error instanceof ConflictError && error.code === 'duplicate' ? inProgress(error) : error;
  });
  if (replay) return { replayed: true, response: replay };
  try {
    const result = await run(async (trx, response) => {
      if (!(await repo.saveResponse(trx, accountId, key, claim.token, response.status, response.body)))
        throw inProgress();
    });
    return { replayed: false, result };
  } catch (error) {
    await repo.releaseClaim(db, accountId, key, claim.token);
    throw error;
  }
}
