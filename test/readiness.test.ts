import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { dialectName, startTestApp } from './support/helpers.js';
import { redisAnswers } from './support/redis.js';
import { startS3 } from './support/s3.js';

const REDIS_URL = process.env.FORMWORK_TEST_REDIS_URL || 'redis://127.0.0.1:6379';

/** A loopback port that nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

// Without FORMWORK_TEST_REDIS_URL a machine without Redis skips the Redis check; with it, Redis
// is required (as in the rate-limit and token suites): a PING slower than redisAnswers' second
// on a busy machine once skipped it in CI unseen.
const redisSkip =
  process.env.FORMWORK_TEST_REDIS_URL || (await redisAnswers(REDIS_URL))
    ? false
    : `no Redis at ${REDIS_URL}; set FORMWORK_TEST_REDIS_URL to require it`;

describe(`readiness and liveness (${dialectName})`, () => {
  it('answers /readyz 200 with every check ok', async () => {
    const app = await startTestApp();
    try {
      const res = await app.request('GET', '/readyz');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { status: 'ok', checks: { database: 'ok', storage: 'ok' } });
      assert.equal(res.headers.get('cache-control'), 'no-store');
    } finally {
      await app.close();
    }
  });

  it('checks Redis when REDIS_URL is set', { skip: redisSkip }, async () => {
    const app = await startTestApp({ REDIS_URL });
    try {
      const res = await app.request('GET', '/readyz');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body.checks, { database: 'ok', redis: 'ok', storage: 'ok' });
    } finally {
      await app.close();
    }
  });

  it('answers /readyz 503 naming Redis while it is away, and /healthz 200', async () => {
    const app = await startTestApp({ REDIS_URL: `redis://127.0.0.1:${await closedPort()}` });
    try {
      const a = await app.account();
      // What /readyz is for: with Redis away every API call is refused...
      assert.equal((await a.get('/forms')).status, 503);
      // ...while the process itself is alive.
      const health = await app.request('GET', '/healthz');
      assert.equal(health.status, 200);
      const ready = await app.request('GET', '/readyz');
      assert.equal(ready.status, 503, ready.text);
      assert.equal(ready.body.status, 'error');
      assert.equal(ready.body.code, 'not_ready');
      assert.match(ready.body.error, /redis/);
      assert.equal(ready.body.checks.database, 'ok');
      assert.equal(ready.body.checks.storage, 'ok');
      assert.ok(['error', 'timeout'].includes(ready.body.checks.redis), ready.text);
      assert.ok(!ready.text.includes('127.0.0.1'), 'the answer names no address');
    } finally {
      await app.close();
    }
  });

  it('checks the S3 bucket: 200 while it answers, 503 naming storage once it is gone', async () => {
    const s3 = await startS3();
    let stopped = false;
    const app = await startTestApp(s3.env);
    try {
      const ok = await app.request('GET', '/readyz');
      assert.equal(ok.status, 200, ok.text);
      assert.deepEqual(ok.body.checks, { database: 'ok', storage: 'ok' });
      await s3.close();
      stopped = true;
      const gone = await app.request('GET', '/readyz');
      assert.equal(gone.status, 503, gone.text);
      assert.equal(gone.body.code, 'not_ready');
      assert.match(gone.body.error, /storage/);
      assert.equal(gone.body.checks.database, 'ok');
      assert.ok(['error', 'timeout'].includes(gone.body.checks.storage), gone.text);
      assert.equal((await app.request('GET', '/healthz')).status, 200);
    } finally {
      await app.close();
      if (!stopped) await s3.close();
    }
  });
});
