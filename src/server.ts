import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from './app.js';
import { Clock } from './clock.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { sharedCallsWaiting } from './db/coalescer.js';
import { openDatabase, type Db } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { Hasher, type ScryptParams } from './crypto/hasher.js';
import { queryRedaction } from './http/logging.js';
import { throttle } from './http/rate-limit.js';
import { createRateLimiter } from './http/rate-limiter.js';
import { jobKinds } from './job-kinds.js';
import { Metrics, metricsAllowed } from './metrics.js';
import type { JobKind } from './jobs/kind.js';
import { startWorker, type Worker } from './jobs/worker.js';
import { FormKeyCache } from './modules/encryption/keys.js';
import { startPresence, writerName, type Presence } from './modules/processes/service.js';
import { removeAbandonedWrites } from './modules/uploads/cleanup.js';
import { createStorage, type Storage } from './storage/index.js';

export interface RunningServer {
  app: FastifyInstance;
  db: Db;
  ctx: AppContext;
  url: string;
  /** The background worker of this process, unless started without one. */
  worker: Worker | undefined;
  close(): Promise<void>;
}

export interface OpenContext {
  db: Db;
  ctx: AppContext;
  close(): Promise<void>;
}

/**
 * Opens the database, brings its schema up to date, registers this process (see
 * modules/processes) and makes the context that services share; then clears what
 * processes that died left behind.
 */
export async function openContext(
  config: Config,
  sqliteFile?: string,
  role: 'serve' | 'worker' = 'serve',
  hashParams?: ScryptParams,
): Promise<OpenContext> {
  const db = openDatabase({
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
    dataDir: config.dataDir,
    sqliteFile,
  });
  const clock = new Clock();
  const rateLimiter = createRateLimiter(config.redisUrl, clock);
  const log = pino({ level: config.logLevel, ...queryRedaction });
  let presence: Presence | undefined;
  let storage: Storage | undefined;
  const close = async () => {
    await presence?.close();
    await rateLimiter.close();
    await storage?.close();
    await db.close();
  };
  try {
    await migrateToLatest(db);
    presence = await startPresence({
      db: db.kysely,
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      timeoutMs: config.processTimeoutSeconds * 1000,
      log,
    });
    storage = createStorage(config, { writer: writerName(presence.id) });
  } catch (error) {
    await close();
    throw error;
  }
  const hasher = new Hasher({
    concurrency: config.hashConcurrency,
    queueLimit: config.hashQueueLimit,
    chargeAccount: (accountId) => throttle(rateLimiter, `hash:account:${accountId}`, config.accountHashAttempts, 900),
    params: hashParams,
  });
  const formKeys = new FormKeyCache({ config, clock, rateLimiter, hasher });
  const metrics = new Metrics({
    db: db.kysely,
    clock,
    role,
    pool: db.poolStats,
    onCollectError: (error) => log.warn({ err: error }, 'metrics: could not read the outbox'),
  });
  const ctx: AppContext = {
    db: db.kysely,
    config,
    rateLimiter,
    clock,
    formKeys,
    hasher,
    storage,
    presence,
    metrics,
  };
  try {
    await presence.reap();
    await removeAbandonedWrites(ctx);
  } catch (error) {
    log.warn({ err: error }, 'could not clear what stopped processes left behind; the upload sweep tries again');
  }
  return { db, ctx, close };
}

/** Starts listening and, with worker, runs the background worker in the same process. */
export async function startServer(
  config: Config,
  options: {
    sqliteFile?: string;
    worker?: boolean;
    /** What new password hashes and form keys are made with (the Hasher's params; the test suite's). */
    hashParams?: ScryptParams;
  } = {},
): Promise<RunningServer> {
  const { db, ctx, close } = await openContext(config, options.sqliteFile, 'serve', options.hashParams);
  try {
    const app = await buildApp(ctx);
    await app.listen({ port: config.port, host: config.host });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    let received = 0;
    if (options.worker) app.server.on('request', () => received++);
    const worker = options.worker
      ? startWorker(ctx, {
          kinds: jobKinds,
          log: app.log,
          yieldTo: { received: () => received, waiting: sharedCallsWaiting },
          graceMs: config.shutdownTimeoutMs,
          onRun: (kind, outcome, seconds) => ctx.metrics.jobRun(kind, outcome, seconds),
        })
      : undefined;
    return {
      app,
      db,
      ctx,
      url: `http://${host}:${port}`,
      worker,
      /**
       * Stops taking requests and waits for those in flight, for SHUTDOWN_TIMEOUT_MS at most:
       * then their connections are closed, so that no client (one trickling a body, say)
       * can hold a stop up.
       */
      async close() {
        const force = setTimeout(() => {
          app.log.warn(
            { shutdownTimeoutMs: config.shutdownTimeoutMs },
            'closing the connections of requests still in flight',
          );
          app.server.closeAllConnections();
        }, config.shutdownTimeoutMs);
        try {
          await Promise.all([app.close(), worker?.stop()]);
        } finally {
          clearTimeout(force);
        }
        await close();
      },
    };
  } catch (error) {
    await close();
    throw error;
  }
}

export interface RunningWorker {
  ctx: AppContext;
  worker: Worker;
  /** Where GET /metrics answers (WORKER_METRICS_PORT), if anywhere. */
  metricsPort: number | undefined;
  close(): Promise<void>;
}

/** GET /metrics of a worker process, on HOST and port, with the API's protection (metricsAllowed). */
async function serveMetrics(ctx: AppContext, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (
      req.method !== 'GET' ||
      path !== '/metrics' ||
      !metricsAllowed(ctx.config.metricsToken, req.headers, req.socket.remoteAddress)
    ) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: 'error', error: `No route ${req.method} ${path}`, code: 'route_not_found' }));
      return;
    }
    ctx.metrics.text().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
      () => res.writeHead(500).end(),
    );
  });
  server.listen(port, ctx.config.host);
  await once(server, 'listening');
  return server;
}

/** A process that only runs jobs (`formwork worker`), of the application's kinds (job-kinds.ts) unless given others. */
export async function startWorkerProcess(
  config: Config,
  options: { kinds?: readonly JobKind[] } = {},
): Promise<RunningWorker> {
  const { ctx, close } = await openContext(config, undefined, 'worker');
  const log = pino({ level: config.logLevel, ...queryRedaction });
  const worker = startWorker(ctx, {
    kinds: options.kinds ?? jobKinds,
    log,
    graceMs: config.shutdownTimeoutMs,
    onRun: (kind, outcome, seconds) => ctx.metrics.jobRun(kind, outcome, seconds),
  });
  let metricsServer: Server | undefined;
  try {
    if (config.workerMetricsPort !== undefined) metricsServer = await serveMetrics(ctx, config.workerMetricsPort);
  } catch (error) {
    await worker.stop();
    await close();
    throw error;
  }
  const address = metricsServer?.address();
  const metricsPort = typeof address === 'object' && address ? address.port : undefined;
  log.info({ worker: worker.id, metricsPort }, 'worker started');
  return {
    ctx,
    worker,
    metricsPort,
    async close() {
      metricsServer?.close();
      metricsServer?.closeAllConnections();
      await worker.stop();
      await close();
    },
  };
}
