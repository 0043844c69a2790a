import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { Clock } from './clock.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { openDatabase, type Db } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { createRateLimiter } from './http/rate-limiter.js';
import { FormKeyCache } from './modules/encryption/keys.js';

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
  try {
    await migrateToLatest(db);
    const clock = new Clock();
    const ctx: AppContext = { db: db.kysely, dialect: db.dialect, config, rateLimiter, clock, formKeys: new FormKeyCache({ config, clock, rateLimiter }) };
    const app = await buildApp(ctx);
    await app.listen({ port: config.port, host: config.host });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
    return {
      app,
      db,
      ctx,
      url: `http://${host}:${port}`,
      async close() {
        await app.close();
        await rateLimiter.close();
        await db.close();
      },
    };
  } catch (error) {
    await rateLimiter.close();
    await db.close();
    throw error;
  }
}
