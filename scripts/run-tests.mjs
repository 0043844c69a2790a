// Runs every test/**/*.test.ts with node's own test runner, so that the same command works on
// Node 20, whose --test takes no globs.
//
// The suites run as JavaScript that esbuild makes once per run, in a copy of the checkout
// (its .ts files kept, a .js beside each), not through tsx: every test file starts a process
// that loads the whole app, and tsx's loader (a thread that each import waits on) made that
// cost 2.1 s of CPU per file against 1.2 s as JavaScript (docs/performance.md, "Tenth pass").
// Child processes that tests start with `--import tsx src/cli.ts` find the copy's files as
// in the checkout. Stack traces point at the .ts lines (source maps).
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

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
 * The longest suites (by CI's timings) start first: two run at a time, and a long one that
 * starts last holds the run up alone at its end. The rest follow in name order.
 */
const LONGEST_FIRST = [
  'test/permission-matrix.test.ts',
  'test/route-matrix.test.ts',
  'test/scale-out.test.ts',
  'test/recovery.test.ts',
  'test/hashing.test.ts',
  'test/hosted-browser.test.ts',
  'test/many-writers.test.ts',
  'test/shutdown.test.ts',
  'test/request-log.test.ts',
  'test/write-property.test.ts',
  'test/encryption-conversion.test.ts',
];

function longestFirst(paths) {
  const rank = (path) => {
    const i = LONGEST_FIRST.indexOf(path);
    return i === -1 ? LONGEST_FIRST.length : i;
  };
  return [...paths].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
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

const only = process.argv.slice(2);
const files = longestFirst(only.length > 0 ? only : collect('test'));
const root = process.cwd();
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
      ...files.map((f) => f.replace(/\.ts$/, '.js')),
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
