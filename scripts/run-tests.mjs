// Runs every test/**/*.test.ts with node's own test runner, so that the same command works on
// Node 20, whose --test takes no globs.
//
// The suites run as JavaScript that esbuild makes once per run, in a copy of the checkout
// (its .ts files kept, a .js beside each), not through tsx: every test process loads the
// whole app, and tsx's loader (a thread that each import waits on) made that
// cost 2.1 s of CPU per file against 1.2 s as JavaScript (docs/performance.md, "Tenth pass").
// Child processes that tests start with `--import tsx src/cli.ts` find the copy's files as
// in the checkout. Stack traces point at the .ts lines (source maps).
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { entrySource } from './test-entry.mjs';

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...collect(path));
    else if (name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

/**
 * Seconds each of the longer suites took on SQLite and on PostgreSQL, the two legs run side by
 * side as CI runs them (without its checks and Node 24 leg) on a slow machine (2026-12-02),
 * for sharing the files out among the processes below; a suite not named counts as
 * DEFAULT_SECONDS. Only the balance depends on them: a stale figure makes a
 * run a little longer, never wrong.
 */
const SECONDS = {
  sqlite: {
    'test/route-matrix.test.ts': 96,
    'test/hosted-browser.test.ts': 74,
    'test/shutdown.test.ts': 72,
    'test/permission-matrix.test.ts': 52,
    'test/hashing.test.ts': 41,
    'test/recovery.test.ts': 38,
    'test/cli.test.ts': 33,
    'test/headers.test.ts': 32,
    'test/oauth-browser.test.ts': 30,
    'test/rate-limit.test.ts': 29,
    'test/jobs.test.ts': 28,
    'test/timeouts.test.ts': 26,
    'test/request-log.test.ts': 25,
    'test/encryption-files.test.ts': 24,
    'test/crypto-envelope.test.ts': 24,
    'test/webhooks.test.ts': 23,
    'test/write-property.test.ts': 21,
    'test/emails.test.ts': 17,
    'test/observability.test.ts': 16,
    'test/encryption.test.ts': 14,
    'test/early-create.test.ts': 13,
    'test/sqlite-shared-file.test.ts': 12,
    'test/submissions-property.test.ts': 11,
    'test/v2-forms.test.ts': 9,
    'test/uploads.test.ts': 9,
    'test/docmerge.test.ts': 9,
    'test/openapi.test.ts': 8,
    'test/readiness.test.ts': 8,
    'test/portals.test.ts': 7,
    'test/storage.test.ts': 7,
    'test/clock.test.ts': 6,
    'test/oauth.test.ts': 6,
  },
  postgres: {
    'test/scale-out.test.ts': 182,
    'test/route-matrix.test.ts': 113,
    'test/hosted-browser.test.ts': 81,
    'test/jobs.test.ts': 42,
    'test/webhooks.test.ts': 38,
    'test/headers.test.ts': 38,
    'test/shutdown.test.ts': 36,
    'test/permission-matrix.test.ts': 32,
    'test/hashing.test.ts': 28,
    'test/cli.test.ts': 25,
    'test/submissions-property.test.ts': 25,
    'test/submissions-list.test.ts': 24,
    'test/rate-limit.test.ts': 23,
    'test/oauth-browser.test.ts': 21,
    'test/docmerge.test.ts': 20,
    'test/recovery.test.ts': 20,
    'test/encryption.test.ts': 20,
    'test/timeouts.test.ts': 19,
    'test/migrations.test.ts': 18,
    'test/encryption-files.test.ts': 18,
    'test/emails.test.ts': 17,
    'test/unit/fts-token-chars.test.ts': 14,
    'test/fields.test.ts': 13,
    'test/clock.test.ts': 11,
    'test/many-writers.test.ts': 11,
    'test/crypto-envelope.test.ts': 11,
    'test/request-log.test.ts': 10,
    'test/pg-create-statements.test.ts': 10,
    'test/portals.test.ts': 10,
    'test/submission-cascades.test.ts': 9,
    'test/folders.test.ts': 9,
    'test/write-property.test.ts': 8,
    'test/early-create.test.ts': 8,
    'test/forms.test.ts': 7,
    'test/observability.test.ts': 7,
    'test/oauth.test.ts': 7,
    'test/smartlists.test.ts': 7,
    'test/readiness.test.ts': 7,
    'test/uploads.test.ts': 7,
    'test/hosted.test.ts': 6,
    'test/v2-forms.test.ts': 6,
    'test/tokens.test.ts': 6,
    'test/pg-connection-loss.test.ts': 6,
  },
};
const DEFAULT_SECONDS = 2;

/**
 * How many processes the suites run in, two at a time (FORMWORK_TEST_PROCESSES; 0 gives each
 * file its own, as before 2026-12-02). Loading the app costs a process about 1.4 s of CPU
 * (Kysely, TypeBox, Fastify and its serializers, LiquidJS, the OAuth server, prom-client, then
 * the app's own modules), and with a process per file the 86 files paid it 86 times on each
 * leg of CI: the SQLite leg alone took 305 s and 461 s of CPU, in 8 processes 208 s and 271 s
 * of CPU, the same 1,915 tests passing (docs/performance.md, "Forty-second pass"). Each process
 * runs its files one after the other, each file as a suite named by its path and loaded once
 * the one before it has ended (test-entry.mjs), its own hooks inside it, as it ran alone; no
 * suite changes process-wide state (environment, working directory, globals). A failed test
 * that leaves a handle open (a server, a child process) would keep its whole process, and so
 * the run, from ending; the process fails instead, LINGER_SECONDS after its last test.
 */
const PROCESSES = Number(process.env.FORMWORK_TEST_PROCESSES ?? 8);

/**
 * The files in PROCESSES lists of about equal seconds (the longest first, each to the list
 * with the fewest), the longest lists first: two run at a time, and a long one that started
 * last would hold the run up alone at its end.
 */
function shareOut(paths) {
  const measured = SECONDS[process.env.FORMWORK_TEST_DATABASE_URL ? 'postgres' : 'sqlite'];
  const seconds = (path) => measured[path] ?? DEFAULT_SECONDS;
  const count = PROCESSES > 0 ? Math.min(PROCESSES, paths.length) : paths.length;
  const lists = Array.from({ length: count }, () => ({ files: [], seconds: 0 }));
  const longestFirst = [...paths].sort((a, b) => seconds(b) - seconds(a) || (a < b ? -1 : a > b ? 1 : 0));
  for (const path of longestFirst) {
    const list = lists.reduce((least, l) => (l.seconds < least.seconds ? l : least));
    list.files.push(path);
    list.seconds += seconds(path);
  }
  return lists.sort((a, b) => b.seconds - a.seconds).map((l) => l.files);
}

/**
 * How long a test process may run on after its last test before it is failed (test-entry.mjs):
 * a process ends within a second or two of its last test when nothing is left open.
 */
const LINGER_SECONDS = 60;

/** The file node --test is given for one list: written in the copy, it runs the list's files (test-entry.mjs). */
function entryFor(copy, list, index) {
  const entry = join('test-processes', `${index + 1}.js`);
  mkdirSync(join(copy, 'test-processes'), { recursive: true });
  const files = list.map((path) => ({ name: path, specifier: `../${path.replace(/\.ts$/, '.js')}` }));
  writeFileSync(join(copy, entry), entrySource(files, LINGER_SECONDS));
  return entry;
}

/** Not copied: installed, built, or made by runs. */
const LEFT_OUT = new Set(['node_modules', '.git', 'dist', 'data', 'test-artifacts', '.bench', 'coverage', '.scratch']);

function typeScriptIn(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...typeScriptIn(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/**
 * On PostgreSQL (FORMWORK_TEST_DATABASE_URL), a database migrated once for the run, that each
 * test app's database is copied from (CREATE DATABASE ... TEMPLATE; test/support/helpers.ts):
 * migrating took about half a second for each of the suite's hundred-odd apps. Dropped after
 * the run, however it ends.
 */
async function migratedTemplate(copy) {
  const adminUrl = process.env.FORMWORK_TEST_DATABASE_URL;
  if (!adminUrl) return undefined;
  const { default: pg } = await import('pg');
  const name = `fw_template_${randomBytes(6).toString('hex')}`;
  const admin = async (statement) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const drop = () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  try {
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    await migrate(copy, { databaseUrl: url.toString(), dataDir: tmpdir() });
  } catch (error) {
    await drop();
    throw error;
  }
  return { name, drop };
}

/**
 * A SQLite file migrated once for the run, that each test app's own database starts as a copy
 * of (test/support/helpers.ts): migrating a new file took about 0.2 s of CPU for each of the
 * suite's hundred-odd apps, copying it a few milliseconds. Closed, so its WAL is checkpointed
 * into it; removed with the copy.
 */
async function migratedSqliteFile(copy) {
  const dir = join(copy, '.sqlite-template');
  await migrate(copy, { databaseUrl: undefined, dataDir: dir });
  return join(dir, 'formwork.db');
}

/** Opens the database options name with the copy's own code, migrates it to the latest schema and closes it. */
async function migrate(copy, options) {
  const { openDatabase } = await import(pathToFileURL(join(copy, 'src/db/database.js')).href);
  const { migrateToLatest } = await import(pathToFileURL(join(copy, 'src/db/migrate.js')).href);
  const db = openDatabase(options);
  try {
    await migrateToLatest(db);
  } finally {
    await db.close();
  }
}

const root = process.cwd();
const only = process.argv.slice(2).map((path) => relative(root, resolve(path)).split(sep).join('/'));
const files = only.length > 0 ? only : collect('test');
const copy = mkdtempSync(join(tmpdir(), 'formwork-tests-'));
let status = 1;
let template;
try {
  cpSync(root, copy, { recursive: true, filter: (path) => !LEFT_OUT.has(relative(root, path).split(sep)[0]) });
  symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'), 'dir');
  await build({
    // bench/: tests check the benchmark's own pieces too (test/pgbench-replay.test.ts).
    entryPoints: [...typeScriptIn('src'), ...typeScriptIn('test'), ...typeScriptIn('bench')],
    outdir: copy,
    outbase: root,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'inline',
    logLevel: 'error',
  });
  template = await migratedTemplate(copy);
  const sqliteTemplate = await migratedSqliteFile(copy);
  const result = spawnSync(
    process.execPath,
    [
      '--enable-source-maps',
      '--test',
      '--test-concurrency=2',
      '--test-reporter=spec',
      ...shareOut(files).map((list, i) => entryFor(copy, list, i)),
    ],
    {
      stdio: 'inherit',
      cwd: copy,
      env: {
        ...process.env,
        FORMWORK_TEST_SQLITE_TEMPLATE: sqliteTemplate,
        ...(template && { FORMWORK_TEST_PG_TEMPLATE: template.name }),
      },
    },
  );
  status = result.status ?? 1;
} finally {
  await template?.drop();
  // What a failed browser test left to look at.
  if (existsSync(join(copy, 'test-artifacts')))
    cpSync(join(copy, 'test-artifacts'), join(root, 'test-artifacts'), { recursive: true });
  rmSync(copy, { recursive: true, force: true });
}
process.exit(status);
