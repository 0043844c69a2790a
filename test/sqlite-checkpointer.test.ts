import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { openDatabase } from '../src/db/database.js';
import { TEST_PG_URL } from './support/helpers.js';

describe('SQLite checkpoints in a thread of their own', { skip: TEST_PG_URL ? 'SQLite only' : false }, () => {
  it('copies committed pages into the database file without a commit on the event loop doing it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'formwork-checkpoint-'));
    const file = join(dir, 'formwork.db');
    const db = openDatabase({ databaseUrl: undefined, dataDir: dir });
    try {
      await sql`create table filler (id integer primary key, body text not null)`.execute(db.kysely);
      const before = statSync(file).size;
      // About 4 MB: far below the writer's own threshold (FALLBACK_AUTOCHECKPOINT_PAGES, 64 MB),
      // so only the checkpointer moves it from the WAL into the file.
      const body = 'x'.repeat(4000);
      await db.kysely.transaction().execute(async (trx) => {
        for (let i = 0; i < 1000; i++) await sql`insert into filler (body) values (${body})`.execute(trx);
      });
      let size = statSync(file).size;
      for (let waited = 0; size < before + 3_000_000 && waited < 10_000; waited += 50) {
        await sleep(50);
        size = statSync(file).size;
      }
      assert.ok(size >= before + 3_000_000, `the database file grew from ${before} to ${size} bytes only`);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
