import type { Kysely } from 'kysely';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Hasher } from './crypto/hasher.js';
import type { Database } from './db/schema.js';
import type { RateLimiter } from './http/rate-limiter.js';
import type { Metrics } from './metrics.js';
import type { FormKeyCache } from './modules/encryption/keys.js';
import type { Presence } from './modules/processes/service.js';
import type { Storage } from './storage/types.js';

/** What services need from the process: the database, the settings, the rate-limit counters and file storage. */
export interface AppContext {
  db: Kysely<Database>;
  config: Config;
  /** Shared by the API quotas and attempt throttles; in Redis when REDIS_URL is set. */
  rateLimiter: RateLimiter;
  /** What new code reads the time from, so that tests can move it. */
  clock: Clock;
  /** Unwrapped keys of encrypted forms, briefly, per process. */
  formKeys: FormKeyCache;
  /** Every password hash of the process (scrypt), bounded in concurrency and queue. */
  hasher: Hasher;
  /** Uploaded files: local disk or an S3-compatible bucket. */
  storage: Storage;
  /** This process's registration, and which others have stopped (whose work may be taken over). */
  presence: Presence;
  /** This process's Prometheus metrics (GET /metrics). */
  metrics: Metrics;
}
