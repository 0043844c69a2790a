import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { NotFoundError } from '../errors.js';
import { metricsAllowed } from '../metrics.js';
import { holdRequestId, withRequestId } from '../request-context.js';

/** An incoming x-request-id is kept when it looks like an id: 1 to 128 of these characters. */
const SANE_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/**
 * The request id of a request: the x-request-id that the balancer (or the client) sent, when
 * it is sane, else a new UUID. Fastify's genReqId: it goes into every log line of the request
 * (as requestId).
 */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SANE_ID.test(given) ? given : randomUUID();
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route hands its request id on itself (a submission create: RequestMeta), and enters
     * the request-id context only for the part that needs it. The context costs every promise
     * of the process a hook on Node 20 while any request holds it: 6–9% more creates a second
     * on PostgreSQL without it (docs/performance.md, seventeenth pass).
     */
    requestIdPassed?: boolean;
  }
}

/** Methods that only read: what they run enqueues no job. */
const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Every answer carries x-request-id. The rest of a writing request runs with it as the current
 * request id (src/request-context.ts), held until its answer is done or its connection closes,
 * so that the jobs it enqueues carry it to the worker; reads run without it (holdRequestId says
 * why), and so do routes that pass it on themselves (requestIdPassed). Work a handler goes on
 * with after its client went away may enqueue without the id.
 */
export function registerRequestId(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    void reply.header('x-request-id', request.id);
    if (READS.has(request.method) || request.routeOptions.config.requestIdPassed) return done();
    reply.raw.once('close', holdRequestId());
    withRequestId(request.id, done);
  });
}

/**
 * GET /metrics (Prometheus text format) and the request counters behind it: by method, route
 * pattern (the raw URL would be a label per id) and status. Protected by metricsAllowed.
 */
export function registerMetrics(app: FastifyInstance, ctx: AppContext): void {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    if (route !== '/metrics') ctx.metrics.request(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (!metricsAllowed(ctx.config.metricsToken, request.headers, request.socket.remoteAddress))
      // Answered as for a route that does not exist: nothing tells a stranger it is there.
      throw new NotFoundError('route_not_found', 'No route GET /metrics');
    const { contentType, body } = await ctx.metrics.text();
    return reply.type(contentType).send(body);
  });
}
