/**
 * The seam between the databases (src/db/engine.ts): each engine implements every
 * operation, a database and its transactions find their engine, what differs does the same
 * thing on the database that runs, and no module or job branches on the dialect itself.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ESLint } from 'eslint';
import { Kysely, sql, SqliteDialect } from 'kysely';
import SQLite from 'better-sqlite3';
import { engineOf, type SqlEngine } from '../src/db/engine.js';
import { postgresEngine } from '../src/db/postgres-engine.js';
import type { Database } from '../src/db/schema.js';
import { sqliteEngine } from '../src/db/sqlite-engine.js';
import { transact } from '../src/db/transaction.js';
import { dialectName, startTestApp, type TestApp } from './support/helpers.js';

/** Every operation of SqlEngine; the type below fails to compile when one is added and not listed. */
const OPERATIONS = [
  'writeBatchSize',
  'writableCtes',
  'countSlot',
  'shareRows',
  'now',
  'containsInsensitive',
  'lowerCase',
  'jsonArrayLength',
  'serialize',
  'lockRows',
  'claimRows',
  'rowLocks',
  'fullTextColumns',
  'writeFullText',
  'clearFullText',
  'matchFullText',
  'submissionsByFormId',
  'pageFullText',
  'insertRows',
  'notifies',
  'listen',
] as const;
type Unlisted = Exclude<keyof SqlEngine, (typeof OPERATIONS)[number]>;
const everyOperationListed: [Unlisted] extends [never] ? true : Unlisted = true;

const engines: [string, SqlEngine][] = [
  ['sqlite', sqliteEngine],
  ['postgres', postgresEngine('postgres://127.0.0.1:1/unused')],
];

describe('the engines', () => {
  it('implement every operation, and nothing besides', () => {
    assert.equal(everyOperationListed, true);
    for (const [name, engine] of engines) {
      assert.deepEqual(Object.keys(engine).sort(), [...OPERATIONS].sort(), name);
      for (const op of OPERATIONS) {
        const value = engine[op];
        // undefined: no group commit, each write a transaction of its own.
        if (op === 'writeBatchSize')
          assert.ok(value === undefined || (Number.isInteger(value) && (value as number) > 0), `${name}.${op}`);
        else if (op === 'notifies' || op === 'rowLocks' || op === 'writableCtes')
          assert.equal(typeof value, 'boolean', `${name}.${op}`);
        else assert.equal(typeof value, 'function', `${name}.${op}`);
      }
    }
  });

  it('refuse a Kysely instance that was not opened with one', async () => {
    const sqlite = new SQLite(':memory:');
    const bare = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    try {
      assert.throws(() => engineOf(bare), /no engine/);
    } finally {
      await bare.destroy();
    }
  });
});

describe(`the engine of the running database (${dialectName})`, () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('is the one its database was opened with, in transactions too', async () => {
    const { db } = app.server.ctx;
    const engine = engineOf(db);
    assert.equal(engine.notifies, dialectName === 'postgres');
    if (dialectName === 'sqlite') assert.equal(engine, sqliteEngine);
    await transact(db, async (trx) => assert.equal(engineOf(trx), engine));
  });

  it('matches text case-insensitively and literally: wildcards in the text are plain characters', async () => {
    const { db } = app.server.ctx;
    const contains = async (text: string, part: string) => {
      const r = await sql<{
        hit: number | boolean;
      }>`SELECT CASE WHEN ${engineOf(db).containsInsensitive(sql<string>`${text}`, part)} THEN 1 ELSE 0 END AS hit`.execute(
        db,
      );
      return Number(r.rows[0]!.hit) === 1;
    };
    assert.equal(await contains('Quarterly Report', 'rly rep'), true);
    assert.equal(await contains('50% off_now', '% OFF_'), true);
    assert.equal(await contains('50 percent off', '%'), false);
    assert.equal(await contains('a_b', 'a_c'), false);
    assert.equal(await contains('axb', 'a_b'), false);
    assert.equal(await contains('back\\slash', 'k\\s'), true);
  });

  it("reads the database's clock in epoch milliseconds", async () => {
    const { db } = app.server.ctx;
    const r = await sql<{ now: number }>`SELECT ${engineOf(db).now()} AS now`.execute(db);
    const now = Number(r.rows[0]!.now);
    assert.ok(Number.isInteger(now), String(now));
    // Milliseconds, not seconds: after 2020 and before 2100.
    assert.ok(now > Date.UTC(2020, 0, 1) && now < Date.UTC(2100, 0, 1), String(now));
  });
});

describe('the dialect stays behind the seam', () => {
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
    );

  it('is not named in src/modules or src/jobs', () => {
    const named = [...files('src/modules'), ...files('src/jobs')].filter((f) =>
      /\bdialect\b|PostgresAdapter|SqliteAdapter/i.test(readFileSync(f, 'utf8')),
    );
    assert.deepEqual(named, []);
  });

  it('is refused by the linter when a module imports it', async () => {
    const eslint = new ESLint();
    const code = "import type { Dialect } from '../../db/dialect.js';\nexport const d: Dialect = 'sqlite';\n";
    const ruleIds = async (filePath: string) =>
      (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId);
    assert.ok((await ruleIds('src/modules/forms/example.ts')).includes('import-x/no-restricted-paths'));
    assert.ok(!(await ruleIds('src/db/migrations/example.ts')).includes('import-x/no-restricted-paths'));
  });
});
