import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { AppContext } from '../context.js';

/** How long one dependency may take to answer a readiness check. */
const CHECK_TIMEOUT_MS = 2000;

export type CheckState = 'ok' | 'error' | 'timeout';

class CheckTimeout extends Error {}

async function probe(
  check: (signal: AbortSignal) => Promise<unknown>,
): Promise<{ state: CheckState; cause?: unknown }> {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      reject(new CheckTimeout());
    }, CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(abort.signal), timeout]);
    return { state: 'ok' };
  } catch (error) {
    return { state: error instanceof CheckTimeout ? 'timeout' : 'error', cause: error };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * GET /readyz: whether this process can serve the API now. It checks every dependency the API
 * needs, each within 2 s and all at once: the database (a trivial query), Redis when REDIS_URL
 * is set (the rate limits refuse every call without it), and storage (the local directory is
 * writable, the bucket answers HeadBucket). 200 {status, checks} when all are ok; otherwise
 * 503 with the error body, naming what failed, and every check's state. The causes go to the
 * log, not to the (public) answer. /healthz stays the liveness check: the process answers.
 */
export function registerReadiness(app: FastifyInstance, ctx: AppContext): void {
  app.get('/readyz', { schema: { hide: true } }, async (request, reply) => {
    const checks: Record<string, () => Promise<unknown>> = {
      database: () => sql`select 1`.execute(ctx.db),
      ...(ctx.config.redisUrl ? { redis: () => ctx.rateLimiter.ping() } : {}),
    };
    const names = [...Object.keys(checks), 'storage'];
    const results = await Promise.all([
      ...Object.values(checks).map((c) => probe(c)),
      probe((signal) => ctx.storage.check(signal)),
    ]);
    const states = Object.fromEntries(names.map((name, i) => [name, results[i]!.state])) as Record<string, CheckState>;
    const failed = names.filter((name) => states[name] !== 'ok');
    if (failed.length === 0) return { status: 'ok', checks: states };
    request.log.warn(
      { failed: Object.fromEntries(failed.map((name) => [name, String(results[names.indexOf(name)]!.cause)])) },
      'not ready',
    );
    return reply.code(503).send({
      status: 'error',
      error: `Not ready: ${failed.map((name) => `${name} ${states[name] === 'timeout' ? 'did not answer in time' : 'failed'}`).join(', ')}`,
      code: 'not_ready',
      checks: states,
    });
  });
}
