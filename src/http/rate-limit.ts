import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Config } from '../config.js';
import { ServiceUnavailableError, TooManyRequestsError } from '../errors.js';
import { RateLimiterUnavailableError, type RateDecision, type RateLimiter, type RateWindow } from './rate-limiter.js';

/** The per-token API windows the configuration turns on (a limit of 0 turns one off). */
export function apiWindows(config: Pick<Config, 'rateLimitPerMinute' | 'rateLimitPerDay'>): RateWindow[] {
  const windows: RateWindow[] = [];
  if (config.rateLimitPerMinute > 0) windows.push({ name: 'burst', limit: config.rateLimitPerMinute, seconds: 60 });
  if (config.rateLimitPerDay > 0) windows.push({ name: 'daily', limit: config.rateLimitPerDay, seconds: 86_400 });
  return windows;
}

function per(seconds: number): string {
  return seconds === 60 ? 'minute' : seconds === 86_400 ? 'day' : `${seconds} s`;
}

// A limiter that cannot answer refuses the call (see createRedisRateLimiter for why); 503
// tells the client it is not its fault, and the cause goes to the log through the handler.
// Retry-After as every other 503 of the service gives it: clients and balancers act on it.
async function consume(limiter: RateLimiter, key: string, windows: readonly RateWindow[]): Promise<RateDecision> {
  try {
    return await limiter.consume(key, windows);
  } catch (error) {
    if (!(error instanceof RateLimiterUnavailableError)) throw error;
    throw new ServiceUnavailableError('rate_limiter_unavailable', undefined, { cause: error, retryAfterSeconds: 1 });
  }
}

/**
 * draft-ietf-httpapi-ratelimit-headers: `RateLimit` names one policy, the one closest to
 * exhaustion (fewest calls left; on a tie the one that resets later, as it binds longer).
 */
function rateLimitHeader(decision: RateDecision): string {
  let worst = decision.windows[0]!;
  for (const w of decision.windows) {
    if (w.remaining < worst.remaining || (w.remaining === worst.remaining && w.resetSeconds > worst.resetSeconds))
      worst = w;
  }
  return `"${worst.name}";r=${worst.remaining};t=${worst.resetSeconds}`;
}

function refusal(decision: RateDecision): TooManyRequestsError {
  const spent =
    decision.windows.find((w) => w.remaining === 0 && w.resetSeconds === decision.retryAfterSeconds) ??
    decision.windows[0]!;
  return new TooManyRequestsError(
    'rate_limited',
    decision.retryAfterSeconds,
    `This access token has made its ${spent.limit} calls per ${per(spent.seconds)}; try again in ${decision.retryAfterSeconds} s`,
  );
}

/**
 * The per-token API quotas (RATE_LIMIT_PER_MINUTE, RATE_LIMIT_PER_DAY): what registerRateLimits
 * enforces on every route of the API, and what EarlyRoutes count for the answers they give.
 */
export class ApiQuota {
  private readonly windows: RateWindow[];
  private readonly policy: string;

  constructor(
    private readonly limiter: RateLimiter,
    config: Pick<Config, 'rateLimitPerMinute' | 'rateLimitPerDay'>,
  ) {
    this.windows = apiWindows(config);
    this.policy = this.windows.map((w) => `"${w.name}";q=${w.limit};w=${w.seconds}`).join(', ');
  }

  get enabled(): boolean {
    return this.windows.length > 0;
  }

  /** Counts a call of the token; its headers, or throws 429 with them set. */
  async count(tokenHash: string, reply: FastifyReply): Promise<void> {
    const decision = await consume(this.limiter, `token:${tokenHash}`, this.windows);
    reply.header('RateLimit-Policy', this.policy);
    reply.header('RateLimit', rateLimitHeader(decision));
    if (!decision.allowed) throw refusal(decision);
  }

  /**
   * Counts a call of the token at once, where the counters are in this process: the raw
   * header pairs of the answer. Undefined when it cannot be counted without waiting, or was
   * refused (a refused call counts nothing, so the route that answers it counts it again).
   */
  countNow(tokenHash: string): string[] | undefined {
    if (!this.enabled) return [];
    const decision = this.limiter.consumeNow?.(`token:${tokenHash}`, this.windows);
    if (!decision?.allowed) return undefined;
    return ['ratelimit-policy', this.policy, 'ratelimit', rateLimitHeader(decision)];
  }
}

/**
 * Per-token quotas on every route of `scope`; register after the bearer token check, which
 * sets request.principal. The headers are set before the route runs, so every response of
 * the scope carries them, errors and the 429 included.
 */
export function registerRateLimits(scope: FastifyInstance, quota: ApiQuota): void {
  if (!quota.enabled) return;
  // A callback hook: counters in this process (countNow) answer without a promise; a call they
  // refuse counted nothing, so count() counts it again and answers the 429.
  scope.addHook('onRequest', (request, reply, done) => {
    if (!request.principal) return done(); // the token check has already answered 401
    const headers = quota.countNow(request.principal.tokenHash);
    if (headers) {
      for (let i = 0; i < headers.length; i += 2) reply.header(headers[i]!, headers[i + 1]);
      return done();
    }
    quota.count(request.principal.tokenHash, reply).then(() => done(), done);
  });
}

/**
 * Counts one attempt at `key` (sign-in per email, per address, password tries per form) and
 * throws a 429 with Retry-After once `limit` attempts were made within the fixed window of
 * `seconds`. Refused attempts are not counted, so the wait does not grow while refused.
 */
export async function throttle(limiter: RateLimiter, key: string, limit: number, seconds: number): Promise<void> {
  const decision = await consume(limiter, key, [{ name: 'attempts', limit, seconds }]);
  if (!decision.allowed) {
    throw new TooManyRequestsError(
      'rate_limited',
      decision.retryAfterSeconds,
      `Too many attempts; try again in ${decision.retryAfterSeconds} s`,
    );
  }
}

/**
 * Counts one failed authentication from a client address (a bearer token that is unknown,
 * expired or revoked; wrong OAuth client credentials) and throws a 429 past
 * AUTH_FAILURE_ATTEMPTS in 15 minutes. Only failures are counted and only failures are
 * refused: a valid token or secret from the same address still passes, so a client behind
 * the same proxy or NAT as a scanner keeps working. (Tokens and secrets hold 256 random bits;
 * the limit is there to stop scanners hammering the service, not to make guessing feasible.)
 */
export async function countAuthFailure(
  ctx: { rateLimiter: RateLimiter; config: Pick<Config, 'authFailureAttempts'> },
  address: string,
): Promise<void> {
  const decision = await consume(ctx.rateLimiter, `authfail:ip:${address}`, [
    { name: 'auth-failures', limit: ctx.config.authFailureAttempts, seconds: 900 },
  ]);
  if (!decision.allowed) {
    throw new TooManyRequestsError(
      'rate_limited',
      decision.retryAfterSeconds,
      `Too many failed authentications from this address; try again in ${decision.retryAfterSeconds} s`,
    );
  }
}
