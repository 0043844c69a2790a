import type * as IORedis from 'ioredis';
import type { Clock } from '../clock.js';
import { lazyRequire } from '../lazy-require.js';

/** Loaded when a Redis URL is configured: a single process keeps its counters in memory. */
const loadIoRedis = lazyRequire<typeof IORedis>('ioredis');

/** One fixed window: at most `limit` calls per `seconds`, windows aligned on the Unix epoch. */
export interface RateWindow {
  name: string;
  limit: number;
  seconds: number;
}

export interface WindowState {
  name: string;
  limit: number;
  seconds: number;
  /** Calls left in the current window, after this one if it was allowed. */
  remaining: number;
  /** Seconds until the current window ends (at least 1). */
  resetSeconds: number;
}

export interface RateDecision {
  allowed: boolean;
  /** When refused: seconds until every exhausted window has reset; 0 when allowed. */
  retryAfterSeconds: number;
  windows: WindowState[];
}

export interface RateLimiter {
  /**
   * Counts one call against every window of `key`, or none: a call that any window refuses
   * consumes nothing, so a client hammering a closed window does not push its reset further.
   */
  consume(key: string, windows: readonly RateWindow[]): Promise<RateDecision>;
  /**
   * The same as consume, answered at once, where the counters are in this process (memory);
   * absent where they are not (Redis). For EarlyRoutes, which cannot wait.
   */
  consumeNow?(key: string, windows: readonly RateWindow[]): RateDecision;
  /** Resolves when the counters can be reached (always, in memory); for /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Redis is configured but cannot answer; the message names the server, never its password. */
export class RateLimiterUnavailableError extends Error {}

const PREFIX = 'fw:rl:';

interface Slot {
  key: string;
  endMs: number;
}

// The window number is part of the key, so a new window starts at zero without a reset step
// and the old counter only has to be dropped (TTL in Redis, a sweep in memory).
function slots(key: string, windows: readonly RateWindow[], now: number): Slot[] {
  return windows.map((w) => {
    const ms = w.seconds * 1000;
    const n = Math.floor(now / ms);
    return { key: `${PREFIX}${key}:${w.seconds}:${n}`, endMs: (n + 1) * ms };
  });
}

function decide(
  windows: readonly RateWindow[],
  slotList: Slot[],
  counts: number[],
  allowed: boolean,
  now: number,
): RateDecision {
  let retryAfterSeconds = 0;
  const states = windows.map((w, i) => {
    const resetSeconds = Math.max(1, Math.ceil((slotList[i]!.endMs - now) / 1000));
    const count = counts[i]!;
    if (!allowed && count >= w.limit) retryAfterSeconds = Math.max(retryAfterSeconds, resetSeconds);
    return { name: w.name, limit: w.limit, seconds: w.seconds, remaining: Math.max(0, w.limit - count), resetSeconds };
  });
  return { allowed, retryAfterSeconds, windows: states };
}

export interface MemoryRateLimiter extends RateLimiter {
  consumeNow(key: string, windows: readonly RateWindow[]): RateDecision;
  /** Counters held now (for tests: old windows must not pile up). */
  readonly size: number;
}

/** Counters in this process: right for one server, wrong behind a balancer (use Redis there). now: the service clock's time. */
export function createMemoryRateLimiter(now: () => number): MemoryRateLimiter {
  const counters = new Map<string, { count: number; endMs: number }>();
  let nextSweep = 0;
  function consumeNow(key: string, windows: readonly RateWindow[]): RateDecision {
    const t = now();
    // Dropping ended windows at most every 10 s keeps memory bounded by the active keys at
    // an O(n) cost that is spread thinly over the calls.
    if (t >= nextSweep) {
      for (const [k, v] of counters) if (v.endMs <= t) counters.delete(k);
      nextSweep = t + 10_000;
    }
    const slotList = slots(key, windows, t);
    const entries = slotList.map((s) => {
      const e = counters.get(s.key);
      return e && e.endMs > t ? e : undefined;
    });
    const allowed = windows.every((w, i) => (entries[i]?.count ?? 0) < w.limit);
    const counts = slotList.map((s, i) => {
      const e = entries[i];
      if (!allowed) return e?.count ?? 0;
      if (e) return ++e.count;
      counters.set(s.key, { count: 1, endMs: s.endMs });
      return 1;
    });
    return decide(windows, slotList, counts, allowed, t);
  }
  return {
    get size() {
      return counters.size;
    },
    consumeNow,
    async consume(key, windows) {
      return consumeNow(key, windows);
    },
    async ping() {},
    async close() {
      counters.clear();
    },
  };
}

// Check every window, then count in every window only if all allow: one round trip, and
// atomic because Redis runs a script alone. Counters expire when their window ends.
// KEYS[i]: the counter of window i; ARGV[2i-1]: its limit; ARGV[2i]: its end (ms since epoch).
// Returns {allowed (1/0), count1, count2, ...}.
const CONSUME_LUA = `
local counts = {}
local allowed = 1
for i = 1, #KEYS do
  counts[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  if counts[i] >= tonumber(ARGV[2 * i - 1]) then allowed = 0 end
end
if allowed == 1 then
  for i = 1, #KEYS do
    counts[i] = redis.call('INCR', KEYS[i])
    if counts[i] == 1 then redis.call('PEXPIREAT', KEYS[i], ARGV[2 * i]) end
  end
end
table.insert(counts, 1, allowed)
return counts
`;

type ConsumeCommand = (numKeys: number, ...args: (string | number)[]) => Promise<number[]>;

/**
 * Counters in Redis, shared by every process that uses the same server. Windows follow each
 * process's clock; servers kept in step by NTP agree on them to the millisecond.
 *
 * When Redis cannot answer, consume rejects (within about a second) instead of guessing:
 * the same limiter guards sign-in and password attempts, where letting calls through would
 * open the door to guessing whenever Redis is down, and one behaviour for every caller is
 * simpler to reason about. Redis is then as necessary as the database.
 */
export function createRedisRateLimiter(redisUrl: string, now: () => number): RateLimiter {
  const where = (() => {
    const u = new URL(redisUrl);
    return `${u.protocol}//${u.host}`;
  })();
  const redis = new (loadIoRedis().Redis)(redisUrl, {
    // Queue calls only while (re)connecting, and fail them after one failed attempt rather
    // than holding requests for as long as Redis is away.
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 1000,
  });
  let lastError: Error | undefined;
  // Without a listener ioredis prints every failed reconnection; the error reaches callers instead.
  redis.on('error', (error: Error) => {
    lastError = error;
  });
  redis.on('ready', () => {
    lastError = undefined;
  });
  redis.defineCommand('fwRateLimit', { lua: CONSUME_LUA });
  const run = (redis as unknown as { fwRateLimit: ConsumeCommand }).fwRateLimit.bind(redis);

  return {
    async consume(key, windows) {
      const t = now();
      const slotList = slots(key, windows, t);
      const args: (string | number)[] = slotList.map((s) => s.key);
      windows.forEach((w, i) => args.push(w.limit, slotList[i]!.endMs));
      let reply: number[];
      try {
        reply = await run(slotList.length, ...args);
      } catch (error) {
        const cause = lastError ?? error;
        throw new RateLimiterUnavailableError(
          `Redis at ${where} did not answer: ${cause instanceof Error ? cause.message : String(cause)}`,
          { cause },
        );
      }
      return decide(windows, slotList, reply.slice(1), reply[0] === 1, t);
    },
    async ping() {
      try {
        await redis.ping();
      } catch (error) {
        const cause = lastError ?? error;
        throw new RateLimiterUnavailableError(
          `Redis at ${where} did not answer: ${cause instanceof Error ? cause.message : String(cause)}`,
          { cause },
        );
      }
    },
    async close() {
      if (redis.status === 'ready') await redis.quit();
      else redis.disconnect();
    },
  };
}

/** Redis when a URL is configured (counters shared between processes), else process memory; windows by the service clock. */
export function createRateLimiter(redisUrl: string | undefined, clock: Clock): RateLimiter {
  const now = () => clock.now();
  return redisUrl ? createRedisRateLimiter(redisUrl, now) : createMemoryRateLimiter(now);
}
