import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import { isErrorCode } from '../../src/errors.js';
import { createAccount, type CreatedAccount } from '../../src/modules/accounts/service.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { httpRequest } from './http-client.js';

/**
 * The suite runs on SQLite by default. With FORMWORK_TEST_DATABASE_URL set to a PostgreSQL
 * URL, each test app gets a database of its own on that server, dropped at the end.
 */
export const TEST_PG_URL = process.env.FORMWORK_TEST_DATABASE_URL;
export const dialectName = TEST_PG_URL ? 'postgres' : 'sqlite';

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  /** Sent as is, with Content-Type: application/json unless headers say otherwise. */
  raw?: string;
  headers?: Record<string, string>;
}

export interface TestApp {
  url: string;
  server: RunningServer;
  config: Config;
  /** A new account with its owner and a token, and a client bound to that token. */
  account(name?: string): Promise<TestAccount>;
  /** A request to a full path (/healthz, /api/v2/forms.json ...). */
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<Reply<T>>;
  close(): Promise<void>;
}

export interface TestAccount extends CreatedAccount {
  /** Requests under /api/v2025 with this account's token. */
  get<T = any>(path: string, options?: RequestOptions): Promise<Reply<T>>;
  post<T = any>(path: string, body?: unknown, options?: RequestOptions): Promise<Reply<T>>;
  put<T = any>(path: string, body?: unknown, options?: RequestOptions): Promise<Reply<T>>;
  delete<T = any>(path: string, options?: RequestOptions): Promise<Reply<T>>;
}

/**
 * A database migrated once per run, that migrated databases are copied from
 * (scripts/run-tests.mjs makes it, names it here and drops it after the run): migrating took
 * about half a second for each test app. Unset (a suite run by hand), each migrates itself.
 */
const MIGRATED_TEMPLATE = process.env.FORMWORK_TEST_PG_TEMPLATE;

/**
 * A SQLite file migrated once per run (scripts/run-tests.mjs), that a test app's own SQLite
 * database starts as a copy of: migrating a new file took about 0.2 s of CPU for each test app.
 * Unset, each app migrates its own file.
 */
const MIGRATED_SQLITE_FILE = process.env.FORMWORK_TEST_SQLITE_TEMPLATE;

/**
 * A PostgreSQL database of its own on TEST_PG_URL's server: empty, or migrated to the latest
 * schema (a copy of the run's template, where there is one; whoever opens it migrates it
 * anyway, which then does nothing).
 */
export async function createPgDatabase(
  options: { migrated?: boolean } = {},
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `fw_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_PG_URL });
  await admin.connect();
  const template = options.migrated && MIGRATED_TEMPLATE ? ` TEMPLATE ${MIGRATED_TEMPLATE}` : '';
  await admin.query(`CREATE DATABASE ${name}${template}`);
  // A commit waits for its WAL flush (4–5 ms on this disk) only to survive the machine losing
  // power, which a test database never needs; commits stay atomic and in order, and a test
  // that kills our process still finds every acknowledged write (the server keeps running).
  await admin.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
  await admin.end();
  const url = new URL(TEST_PG_URL!);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: TEST_PG_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * An empty database of the suite's engine (a PostgreSQL database of its own, or a SQLite file
 * in a temporary folder), not migrated; drop() closes it and removes it.
 */
export async function openFreshDatabase(): Promise<{ db: Db; drop(): Promise<void> }> {
  if (TEST_PG_URL) {
    const database = await createPgDatabase();
    const db = openDatabase({ databaseUrl: database.url, dataDir: tmpdir() });
    return {
      db,
      async drop() {
        await db.close();
        await database.drop();
      },
    };
  }
  return openSqliteFile();
}

/** A new SQLite database in a directory of its own, with its file's path (for a second connection, as another process). */
export async function openSqliteFile(): Promise<{ db: Db; file: string; drop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'formwork-db-'));
  const db = openDatabase({ databaseUrl: undefined, dataDir: dir });
  return {
    db,
    file: join(dir, 'formwork.db'),
    async drop() {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * What a test app makes new password hashes and form keys with: scrypt at N=2^10, not the
 * service's 2^17 (SCRYPT_PARAMS), which took a third of a second of CPU for each of the
 * suite's hundreds of passwords (a tenth of the suite's CPU) and made no test stronger. What
 * the cost itself brings (the hasher's bounds, hashing_busy) is tested with the service's
 * parameters (startTestApp's productionHashes; test/hashing.test.ts), and so is a stored
 * hash's being checked with its own parameters whatever the process makes new ones with.
 */
export const TEST_HASH_PARAMS = { N: 2 ** 10, r: 8, p: 1 };

/** Every error body that any test receives must carry a code of src/errors.ts (docs/api.md lists them). */
function assertCataloguedCode(body: unknown, what: string): void {
  if (typeof body !== 'object' || body === null || (body as { status?: unknown }).status !== 'error') return;
  const code = (body as { code?: unknown }).code;
  if (!isErrorCode(code))
    throw new Error(`${what} answered the error code ${JSON.stringify(code)}, which src/errors.ts does not list`);
}

/**
 * A service on a database of its own, or, with share, a second process-like instance on
 * the same database as another test app (as when several servers run behind a balancer).
 */
export async function startTestApp(
  env: Record<string, string> = {},
  share?: TestApp,
  options: { productionHashes?: boolean } = {},
): Promise<TestApp> {
  const owned = !share;
  const dataDir = share ? share.config.dataDir : mkdtempSync(join(tmpdir(), 'formwork-test-'));
  const pgDb = owned && TEST_PG_URL ? await createPgDatabase({ migrated: true }) : undefined;
  const sharedDb = share?.config.databaseUrl;
  // Whoever opens it migrates it anyway, which then finds nothing to do.
  if (owned && !pgDb && MIGRATED_SQLITE_FILE && env.DATABASE_URL === undefined && env.DATA_DIR === undefined)
    copyFileSync(MIGRATED_SQLITE_FILE, join(dataDir, 'formwork.db'));
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    PUBLIC_URL: 'http://forms.test',
    // Quotas on, so every test passes through them, but too high to refuse (test/rate-limit.test.ts sets its own).
    RATE_LIMIT_PER_MINUTE: '1000000',
    RATE_LIMIT_PER_DAY: '1000000',
    // The matrices send hundreds of bad tokens from one address (test/tokens.test.ts sets its own limit).
    AUTH_FAILURE_ATTEMPTS: '1000000',
    // Hosted pages' submits, partial saves and upload URLs all come from 127.0.0.1 (test/hosted.test.ts sets its own).
    PUBLIC_SUBMIT_PER_MINUTE: '1000000',
    // Last uses are written when the app closes, not while a test compares two reads (test/tokens.test.ts flushes sooner).
    TOKEN_USAGE_FLUSH_SECONDS: '86400',
    ...(pgDb ? { DATABASE_URL: pgDb.url } : {}),
    ...(sharedDb ? { DATABASE_URL: sharedDb } : {}),
    ...env,
  });
  const server = await startServer(config, { hashParams: options.productionHashes ? undefined : TEST_HASH_PARAMS });

  async function request<T>(method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
      headers['content-type'] = 'application/json';
    const res = await httpRequest(`${server.url}${path}`, { method, headers, body });
    const text = res.text;
    let parsed: unknown = text;
    // JSON and +json bodies are parsed; NDJSON (application/x-ndjson) stays text.
    if (/[/+]json\b/.test(res.headers.get('content-type') ?? '') && text !== '') parsed = JSON.parse(text);
    assertCataloguedCode(parsed, `${method} ${path}`);
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  let accounts = 0;
  return {
    url: server.url,
    server,
    config,
    request,
    async account(name = `Account ${++accounts}`) {
      const created = await createAccount(
        server.ctx,
        { name, email: `${randomBytes(6).toString('hex')}@example.com` },
        server.ctx.hasher.kdf(),
      );
      const api = <T>(method: string, path: string, options: RequestOptions = {}) =>
        request<T>(method, `/api/v2025${path}`, { token: created.token, ...options });
      return {
        ...created,
        get: <T>(path: string, options?: RequestOptions) => api<T>('GET', path, options),
        post: <T>(path: string, body?: unknown, options?: RequestOptions) => api<T>('POST', path, { body, ...options }),
        put: <T>(path: string, body?: unknown, options?: RequestOptions) => api<T>('PUT', path, { body, ...options }),
        delete: <T>(path: string, options?: RequestOptions) => api<T>('DELETE', path, options),
      };
    },
    async close() {
      await server.close();
      await pgDb?.drop();
      if (owned) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * An app and an account, started before a describe block's tests and closed after them, and a
 * second app on the same database (its own pool and caches, as another process's), or with
 * processes: 1 the first again. Given to use once started.
 */
export function withApps(
  use: (apps: { app: TestApp; second: TestApp; a: TestAccount }) => void,
  processes: 1 | 2 = 2,
): void {
  const started: TestApp[] = [];
  before(async () => {
    const app = await startTestApp();
    started.push(app);
    const second = processes === 2 ? await startTestApp({}, app) : app;
    if (second !== app) started.push(second);
    use({ app, second, a: await app.account() });
  });
  after(async () => {
    for (const app of started.reverse()) await app.close();
  });
}

/**
 * The tables dumpData reads, looked up once per database: the schema does not change under a
 * test app, and on PostgreSQL the catalog's look-up cost more than reading the rows (the
 * property suites dump the database before and after each of hundreds of requests).
 */
const tablesOf = new WeakMap<Db['kysely'], Promise<string[]>>();
function dumpedTables(db: Db['kysely']): Promise<string[]> {
  let tables = tablesOf.get(db);
  if (!tables) {
    tables = db.introspection.getTables().then((all) =>
      all
        .map((t) => t.name)
        .filter((n) => !n.startsWith('kysely_') && n !== 'processes')
        .sort(),
    );
    tablesOf.set(db, tables);
    // A look-up that failed is made again next time.
    tables.catch(() => tablesOf.delete(db));
  }
  return tables;
}

/** Asserts a reply's status (and, given one, its error code), naming what was asked; answers its body. */
export function expectStatus<T = any>(res: Reply<T>, status: number, what: string, code?: string): T {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text.slice(0, 600)}`);
  if (code !== undefined)
    assert.equal((res.body as { code?: string }).code, code, `${what}: ${res.text.slice(0, 600)}`);
  return res.body;
}

/**
 * Every row of every table, as one string, to show that a refused request wrote nothing.
 * The processes table is left out: each process's heartbeat writes it on a timer, whatever
 * the requests do.
 */
export async function dumpData(app: TestApp): Promise<string> {
  const db = app.server.db.kysely;
  const tables = await dumpedTables(db);
  const out: Record<string, string[]> = Object.fromEntries(tables.map((t) => [t, []]));
  if (app.server.db.dialect === 'postgres') {
    // One statement for every table: on PostgreSQL each statement is a round trip and a plan.
    const each = tables.map((t) => sql`SELECT ${sql.lit(t)} AS t, to_jsonb(x)::text AS r FROM ${sql.table(t)} x`);
    const rows = await sql<{ t: string; r: string }>`${sql.join(each, sql` UNION ALL `)}`.execute(db);
    for (const { t, r } of rows.rows) out[t]!.push(r);
  } else {
    for (const table of tables) {
      const rows = await sql<Record<string, unknown>>`SELECT * FROM ${sql.table(table)}`.execute(db);
      out[table] = rows.rows.map((r) => JSON.stringify(r));
    }
  }
  for (const rows of Object.values(out)) rows.sort();
  return JSON.stringify(out);
}
