import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { Clock } from './clock.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { openDatabase, type Db } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { createRateLimiter } from './http/rate-limiter.js';
import { sweepExpiredUploads } from './modules/uploads/service.js';
import { createStorage } from './storage/index.js';

/** How often unclaimed uploads whose URL expired are removed. */
const SWEEP_INTERVAL_MS = 10 * 60 * 1000;

export interface RunningServer {
  app: FastifyInstance;
  db: Db;
  ctx: AppContext;
  url: string;
  close(): Promise<void>;
}

/** Opens the database, brings its schema up to date and starts listening. */
export async function startServer(config: Config, options: { sqliteFile?: string } = {}): Promise<RunningServer> {
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, sqliteFile: options.sqliteFile });
  const rateLimiter = createRateLimiter(config.redisUrl);
  const storage = createStorage(config);
  let sweeper: NodeJS.Timeout | undefined;
  try {
    await migrateToLatest(db);
    const ctx: AppContext = { db: db.kysely, dialect: db.dialect, config, rateLimiter, clock: new Clock(), storage };
    const app = await buildApp(ctx);
    await app.listen({ port: config.port, host: config.host });
    // outbox: a periodic job once the job system lands; a failed sweep is retried on the next tick.
    sweeper = setInterval(() => {
      sweepExpiredUploads(ctx).catch((error: unknown) => app.log.error({ err: error }, 'sweeping expired uploads failed'));
    }, SWEEP_INTERVAL_MS);
    sweeper.unref();
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    return {
      app,
      db,
      ctx,
      url: `http://${host}:${port}`,
      async close() {
        clearInterval(sweeper);
        await app.close();
        await rateLimiter.close();
        await storage.close();
        await db.close();
      },
    };
  } catch (error) {
    clearInterval(sweeper);
    await rateLimiter.close();
    await storage.close();
    await db.close();
    throw error;
  }
}
