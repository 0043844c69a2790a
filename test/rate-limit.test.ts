import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig } from '../src/config.js';
import { hashToken } from '../src/crypto/secrets.js';
import { TooManyRequestsError } from '../src/errors.js';
import { throttle } from '../src/http/rate-limit.js';
import {
  createMemoryRateLimiter,
  createRedisRateLimiter,
  RateLimiterUnavailableError,
  type RateLimiter,
} from '../src/http/rate-limiter.js';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { dialectName, startTestApp, type TestApp } from './support/helpers.js';
import { ProcessSet } from './support/processes.js';
import { awayFromMinuteEnd, awayFromWindowEnd } from './support/quota.js';

const REDIS_URL = process.env.FORMWORK_TEST_REDIS_URL || 'redis://127.0.0.1:6379';

// Without FORMWORK_TEST_REDIS_URL a machine without Redis skips the Redis tests; with it
// (as in CI) an unreachable Redis is a failure.
async function probeRedis(): Promise<string | undefined> {
  const redis = new Redis(REDIS_URL, {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  let cause: Error | undefined; // the socket's error says more than the closed connection's
  redis.on('error', (e: Error) => (cause ??= e));
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    const reason = `no Redis at ${REDIS_URL} (${(cause ?? (error as Error)).message}); set FORMWORK_TEST_REDIS_URL to require it`;
    if (process.env.FORMWORK_TEST_REDIS_URL) throw new Error(reason);
    return reason;
  } finally {
    redis.disconnect();
  }
}
const redisSkip = await probeRedis();

const unique = () => `test:${Math.random().toString(36).slice(2)}`;

describe('rate limit settings', () => {
  it('defaults to the original quota and a burst of 600 a minute', () => {
    const c = loadConfig({});
    assert.equal(c.rateLimitPerDay, 14_400);
    assert.equal(c.rateLimitPerMinute, 600);
    assert.equal(c.redisUrl, undefined);
    assert.equal(c.signInAttempts, 10);
    assert.equal(c.encryptionPasswordAttempts, 10);
  });

  it('reads the settings and names a bad one', () => {
    const c = loadConfig({
      RATE_LIMIT_PER_DAY: '0',
      RATE_LIMIT_PER_MINUTE: '30',
      REDIS_URL: 'rediss://:pw@cache.internal:6380/2',
      SIGN_IN_ATTEMPTS: '5',
    });
    assert.equal(c.rateLimitPerDay, 0);
    assert.equal(c.rateLimitPerMinute, 30);
    assert.equal(c.redisUrl, 'rediss://:pw@cache.internal:6380/2');
    assert.equal(c.signInAttempts, 5);
    for (const [env, name] of [
      [{ REDIS_URL: 'http://cache:6379' }, 'REDIS_URL'],
      [{ REDIS_URL: 'not a url' }, 'REDIS_URL'],
      [{ RATE_LIMIT_PER_DAY: '-1' }, 'RATE_LIMIT_PER_DAY'],
      [{ RATE_LIMIT_PER_MINUTE: 'lots' }, 'RATE_LIMIT_PER_MINUTE'],
      [{ SIGN_IN_ATTEMPTS: '0' }, 'SIGN_IN_ATTEMPTS'],
      [{ ENCRYPTION_PASSWORD_ATTEMPTS: '0' }, 'ENCRYPTION_PASSWORD_ATTEMPTS'],
    ] as const) {
      assert.throws(
        () => loadConfig(env),
        (e: unknown) => e instanceof ConfigError && e.setting === name,
        name,
      );
    }
  });
});

/**
 * The behaviour both stores must have; `advance` moves the store's clock on by ms, and
 * `awayFromEnd` keeps calls that must fall in one window of seconds from straddling its end
 * (support/quota.ts; a store on the real clock waits, one on a test clock need not).
 */
function storeContract(
  make: () => {
    limiter: RateLimiter;
    advance(ms: number): Promise<void>;
    awayFromEnd(seconds: number): Promise<void>;
  },
) {
  let limiter: RateLimiter;
  let advance: (ms: number) => Promise<void>;
  let awayFromEnd: (seconds: number) => Promise<void>;
  before(() => ({ limiter, advance, awayFromEnd } = make()));
  after(() => limiter.close());

  it('counts down, refuses at the limit, and refused calls consume no window', async () => {
    const key = unique();
    const windows = [
      { name: 'short', limit: 2, seconds: 60 },
      { name: 'long', limit: 10, seconds: 3600 },
    ];
    await awayFromEnd(60);
    const first = await limiter.consume(key, windows);
    assert.equal(first.allowed, true);
    assert.equal(first.retryAfterSeconds, 0);
    assert.deepEqual(
      first.windows.map((w) => [w.name, w.limit, w.remaining]),
      [
        ['short', 2, 1],
        ['long', 10, 9],
      ],
    );
    assert.ok(first.windows[0]!.resetSeconds >= 1 && first.windows[0]!.resetSeconds <= 60);
    assert.ok(first.windows[1]!.resetSeconds >= 1 && first.windows[1]!.resetSeconds <= 3600);
    assert.equal((await limiter.consume(key, windows)).windows[0]!.remaining, 0);
    for (let i = 0; i < 3; i++) {
      const refused = await limiter.consume(key, windows);
      assert.equal(refused.allowed, false);
      assert.equal(refused.retryAfterSeconds, refused.windows[0]!.resetSeconds);
      // The long window still shows two calls: the refusals were not counted in it.
      assert.deepEqual(
        refused.windows.map((w) => w.remaining),
        [0, 8],
      );
    }
  });

  it('keeps keys apart', async () => {
    const [a, b] = [unique(), unique()];
    const w = [{ name: 'w', limit: 1, seconds: 60 }];
    await awayFromEnd(60);
    assert.equal((await limiter.consume(a, w)).allowed, true);
    assert.equal((await limiter.consume(a, w)).allowed, false);
    assert.equal((await limiter.consume(b, w)).allowed, true);
  });

  it('starts a new window at zero', async () => {
    const key = unique();
    const w = [{ name: 'w', limit: 1, seconds: 1 }];
    // From the start of a window: on Redis's real clock, two calls made late in one could
    // otherwise fall into two windows.
    await advance(1000);
    assert.equal((await limiter.consume(key, w)).allowed, true);
    const refused = await limiter.consume(key, w);
    assert.equal(refused.allowed, false);
    assert.equal(refused.retryAfterSeconds, 1);
    await advance(1000);
    const again = await limiter.consume(key, w);
    assert.equal(again.allowed, true);
    assert.equal(again.windows[0]!.remaining, 0);
  });

  it('throttles attempts with a 429 that says when to come back', async () => {
    const key = `signin:email:${unique()}@example.com`;
    await awayFromEnd(900);
    await throttle(limiter, key, 2, 900);
    await throttle(limiter, key, 2, 900);
    await assert.rejects(throttle(limiter, key, 2, 900), (e: unknown) => {
      assert.ok(e instanceof TooManyRequestsError);
      assert.equal(e.statusCode, 429);
      assert.equal(e.code, 'rate_limited');
      assert.ok(e.retryAfterSeconds >= 1 && e.retryAfterSeconds <= 900);
      return true;
    });
  });
}

describe('memory rate limiter', () => {
  let clock = Date.now();
  storeContract(() => ({
    limiter: createMemoryRateLimiter(() => clock),
    advance: async (ms) => {
      clock += ms;
    },
    awayFromEnd: async () => {},
  }));

  it('drops ended windows, so memory holds only live counters', async () => {
    let t = 1_000_000_000_000;
    const limiter = createMemoryRateLimiter(() => t);
    for (let i = 0; i < 100; i++) await limiter.consume(`k${i}`, [{ name: 'w', limit: 5, seconds: 60 }]);
    assert.equal(limiter.size, 100);
    t += 61_000;
    await limiter.consume('k0', [{ name: 'w', limit: 5, seconds: 60 }]);
    assert.equal(limiter.size, 1);
  });
});

describe('Redis rate limiter', { skip: redisSkip }, () => {
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS_URL);
  });
  after(() => redis.quit());

  storeContract(() => ({
    limiter: createRedisRateLimiter(REDIS_URL, Date.now),
    // Real time: Redis expires the counters by the wall clock.
    advance: (ms) => new Promise((r) => setTimeout(r, ms - (Date.now() % ms) + 20)),
    awayFromEnd: (seconds) => awayFromWindowEnd(seconds * 1000, 2000),
  }));

  it('keeps counters under fw:rl: and lets them expire with their window', async () => {
    const limiter = createRedisRateLimiter(REDIS_URL, Date.now);
    try {
      const key = unique();
      await limiter.consume(key, [{ name: 'w', limit: 5, seconds: 60 }]);
      const keys = await redis.keys(`fw:rl:${key}:*`);
      assert.deepEqual(keys, [`fw:rl:${key}:60:${Math.floor(Date.now() / 60_000)}`]);
      const ttl = await redis.pttl(keys[0]!);
      assert.ok(ttl > 0 && ttl <= 60_000, `ttl ${ttl}`);
      await redis.del(keys[0]!);
    } finally {
      await limiter.close();
    }
  });
});

describe('Redis rate limiter without Redis', () => {
  it('fails quickly with an error that names the server', async () => {
    const limiter = createRedisRateLimiter('redis://:secret@127.0.0.1:1', Date.now);
    try {
      const started = Date.now();
      await assert.rejects(limiter.consume('k', [{ name: 'w', limit: 5, seconds: 60 }]), (e: unknown) => {
        assert.ok(e instanceof RateLimiterUnavailableError);
        assert.match(e.message, /^Redis at redis:\/\/127\.0\.0\.1:1 did not answer: /);
        assert.doesNotMatch(e.message, /secret/);
        return true;
      });
      assert.ok(Date.now() - started < 3000);
    } finally {
      await limiter.close();
    }
  });

  it('answers 503 rather than letting API calls through', async () => {
    const app = await startTestApp({ REDIS_URL: 'redis://127.0.0.1:1' });
    try {
      const a = await app.account();
      const res = await a.get('/forms');
      assert.equal(res.status, 503);
      assert.deepEqual(Object.keys(res.body).sort(), ['code', 'error', 'status']);
      assert.equal(res.body.code, 'rate_limiter_unavailable');
      assert.equal(res.headers.get('retry-after'), '1');
    } finally {
      await app.close();
    }
  });
});

const RATE_LIMIT = /^"(burst|daily)";r=(\d+);t=(\d+)$/;
function rateLimit(headers: Headers): { policy: string; r: number; t: number } {
  const m = RATE_LIMIT.exec(headers.get('ratelimit') ?? '');
  assert.ok(m, `RateLimit header: ${headers.get('ratelimit')}`);
  return { policy: m[1]!, r: Number(m[2]), t: Number(m[3]) };
}

describe(`API quotas per access token (${dialectName}, in memory)`, () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ RATE_LIMIT_PER_MINUTE: '3', RATE_LIMIT_PER_DAY: '5' });
  });
  after(() => app.close());

  it('announces the policies, counts down, then refuses with Retry-After and the error body', async () => {
    await awayFromMinuteEnd(5000);
    const a = await app.account();
    for (const expected of [2, 1, 0]) {
      const res = await a.get('/forms');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('ratelimit-policy'), '"burst";q=3;w=60, "daily";q=5;w=86400');
      const { policy, r, t } = rateLimit(res.headers);
      assert.deepEqual([policy, r], ['burst', expected]);
      assert.ok(t >= 1 && t <= 60);
      assert.equal(res.headers.get('retry-after'), null);
    }
    // Refused calls count in neither window: were they counted, the daily window would be
    // used up too, and RateLimit and Retry-After would point at the end of the day.
    for (let i = 0; i < 4; i++) {
      const refused = await a.get('/forms');
      assert.equal(refused.status, 429);
      assert.deepEqual(Object.keys(refused.body).sort(), ['code', 'error', 'status']);
      assert.equal(refused.body.status, 'error');
      assert.equal(refused.body.code, 'rate_limited');
      assert.match(refused.body.error, /3 calls per minute/);
      assert.equal(refused.headers.get('ratelimit-policy'), '"burst";q=3;w=60, "daily";q=5;w=86400');
      const { policy, r, t } = rateLimit(refused.headers);
      assert.deepEqual([policy, r], ['burst', 0]);
      assert.equal(refused.headers.get('retry-after'), String(t));
      assert.ok(t <= 60);
    }
  });

  it('counts each token apart, and sets the headers on error responses too', async () => {
    const a = await app.account();
    const b = await app.account();
    assert.equal((await a.get('/forms')).status, 200);
    assert.equal(rateLimit((await b.get('/forms')).headers).r, 2);
    // Another token of the same user has a quota of its own.
    const { token } = await createPersonalToken(app.server.ctx, a.userId);
    const other = await a.get('/forms', { token });
    assert.equal(rateLimit(other.headers).r, 2);
    const missing = await a.get('/forms/999999');
    assert.equal(missing.status, 404);
    assert.equal(rateLimit(missing.headers).r, 1);
    // No token, no quota to report.
    const anonymous = await app.request('GET', '/api/v2025/forms');
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers.get('ratelimit'), null);
  });

  it('names the daily policy once it is the closer one, on legacy paths too', async () => {
    await awayFromMinuteEnd(5000);
    const a = await app.account();
    const small = await startTestApp({ RATE_LIMIT_PER_MINUTE: '10', RATE_LIMIT_PER_DAY: '2' }, app);
    try {
      const get = () => small.request('GET', '/api/v2/forms.json', { token: a.token });
      assert.deepEqual(rateLimit((await get()).headers).policy, 'daily');
      const last = await get();
      assert.equal(last.status, 200);
      assert.equal(last.headers.get('ratelimit-policy'), '"burst";q=10;w=60, "daily";q=2;w=86400');
      const refused = await get();
      assert.equal(refused.status, 429);
      assert.match(refused.body.error, /2 calls per day/);
      const { policy, t } = rateLimit(refused.headers);
      assert.equal(policy, 'daily');
      assert.ok(t > 0 && t <= 86_400);
      assert.equal(refused.headers.get('retry-after'), String(t));
    } finally {
      await small.close();
    }
  });

  it('turns a window off with 0, and both off means no headers', async () => {
    const a = await app.account();
    const minuteOnly = await startTestApp({ RATE_LIMIT_PER_MINUTE: '10', RATE_LIMIT_PER_DAY: '0' }, app);
    const none = await startTestApp({ RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_PER_DAY: '0' }, app);
    try {
      const res = await minuteOnly.request('GET', '/api/v2025/forms', { token: a.token });
      assert.equal(res.headers.get('ratelimit-policy'), '"burst";q=10;w=60');
      const free = await none.request('GET', '/api/v2025/forms', { token: a.token });
      assert.equal(free.status, 200);
      assert.equal(free.headers.get('ratelimit-policy'), null);
      assert.equal(free.headers.get('ratelimit'), null);
    } finally {
      await minuteOnly.close();
      await none.close();
    }
  });
});

// Two real server processes on one database and one Redis, as behind a load balancer.
describe(`API quotas shared through Redis by two server processes (${dialectName})`, { skip: redisSkip }, () => {
  const processes = new ProcessSet('rl');
  const urls: string[] = [];
  let token: string;

  const serve = async () =>
    (await processes.serve({ REDIS_URL, RATE_LIMIT_PER_MINUTE: '6', RATE_LIMIT_PER_DAY: '1000' })).url;

  before(async () => {
    await processes.open();
    token = await processes.createAccount('Shared', 'shared@example.com');
    urls.push(...(await Promise.all([serve(), serve()])));
  });

  after(async () => {
    await processes.stopAll('SIGTERM');
    if (token) {
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`fw:rl:token:${hashToken(token)}:*`);
      if (keys.length) await redis.del(...keys);
      await redis.quit();
    }
    await processes.close();
  });

  it('counts calls to either process in one quota, and refusals in none', async () => {
    await awayFromMinuteEnd(10_000);
    const get = (i: number) =>
      fetch(`${urls[i % 2]}/api/v2025/forms`, { headers: { authorization: `Bearer ${token}` } });
    for (let i = 0; i < 6; i++) {
      const res = await get(i);
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(res.headers.get('ratelimit-policy'), '"burst";q=6;w=60, "daily";q=1000;w=86400');
      assert.deepEqual(rateLimit(res.headers).r, 5 - i);
    }
    for (const i of [0, 1]) {
      const refused = await get(i);
      assert.equal(refused.status, 429);
      const body = (await refused.json()) as { status: string; code: string };
      assert.equal(body.status, 'error');
      assert.equal(body.code, 'rate_limited');
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
      assert.equal(rateLimit(refused.headers).t, retryAfter);
    }
    // Read the shared counters themselves: six calls in each window, the refusals in neither.
    const redis = new Redis(REDIS_URL);
    try {
      const hash = hashToken(token);
      const now = Date.now();
      assert.equal(await redis.get(`fw:rl:token:${hash}:60:${Math.floor(now / 60_000)}`), '6');
      assert.equal(await redis.get(`fw:rl:token:${hash}:86400:${Math.floor(now / 86_400_000)}`), '6');
    } finally {
      await redis.quit();
    }
  });
});
