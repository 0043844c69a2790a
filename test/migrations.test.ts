/**
 * Migrations that reshape tables holding data, run on rows written before them: nothing is
 * lost, references still hold, and the new rules apply.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, type Db } from '../src/db/database.js';
import { MIGRATION_NAMES, migrateToLatest, migrateUpTo } from '../src/db/migrate.js';
import { createPgDatabase, dialectName, TEST_PG_URL } from './support/helpers.js';

let db: Db;
let cleanup: () => Promise<void>;

before(async () => {
  if (TEST_PG_URL) {
    const pg = await createPgDatabase();
    db = openDatabase({ databaseUrl: pg.url, dataDir: tmpdir() });
    cleanup = pg.drop;
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'formwork-migrations-'));
    db = openDatabase({ databaseUrl: undefined, dataDir: dir });
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  }
});
after(async () => {
  await db.close();
  await cleanup();
});

describe(`migrations on existing data (${dialectName})`, () => {
  it('0007 to 0009: clients come to require PKCE; users keep their ids, tokens, grants and permissions, and emails become unique per account', async () => {
    const k = db.kysely;
    await migrateUpTo(db, '0006_encryption');
    const now = Date.now();
    const account = (
      await k
        .insertInto('accounts')
        .values({ name: 'Before', created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    const other = (
      await k
        .insertInto('accounts')
        .values({ name: 'Other', created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    const user = (email: string, accountId = account) =>
      k
        .insertInto('users')
        .values({ account_id: accountId, email, name: email, password_hash: null, role: 'member', created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow();
    const owner = (await user('owner@example.com')).id;
    const member = (await user('member@example.com')).id;
    const gone = (await user('gone@example.com')).id;
    await k.deleteFrom('users').where('id', '=', gone).execute();
    await k
      .insertInto('access_tokens')
      .values({ account_id: account, user_id: member, token_hash: 'h1', kind: 'pat', name: 't', created_at: now })
      .execute();
    const client = (
      await k
        .insertInto('oauth_clients')
        .values({
          account_id: account,
          client_id: 'fwc_before',
          secret_hash: 'x',
          name: 'Old app',
          redirect_uris: '[]',
          created_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    await k
      .insertInto('oauth_grants')
      .values({ client_id: client, user_id: owner, account_id: account, scope: 'forms:read', created_at: now })
      .execute();
    const form = (
      await k
        .insertInto('forms')
        .values({
          account_id: account,
          name: 'F',
          submit_button_title: 'Submit',
          settings: '{}',
          view_key: 'vk-before',
          created_at: now,
          updated_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    await k
      .insertInto('form_permissions')
      .values({ user_id: member, form_id: form, account_id: account, level: 'view', updated_at: now })
      .execute();

    assert.deepEqual(await migrateToLatest(db), [
      '0007_token_management',
      '0008_client_pkce',
      '0009_emails_per_account',
      '0010_processes',
      '0011_webhooks',
      '0012_emails',
      '0013_hosted_forms',
      '0017_smart_lists',
    ]);

    assert.equal(
      (await k.selectFrom('oauth_clients').select('require_pkce').where('id', '=', client).executeTakeFirstOrThrow())
        .require_pkce,
      1,
    );
    const users = await k.selectFrom('users').select(['id', 'email']).orderBy('id').execute();
    assert.deepEqual(users, [
      { id: owner, email: 'owner@example.com' },
      { id: member, email: 'member@example.com' },
    ]);
    assert.equal((await k.selectFrom('access_tokens').selectAll().execute()).length, 1);
    assert.equal((await k.selectFrom('oauth_grants').selectAll().execute()).length, 1);
    assert.equal((await k.selectFrom('form_permissions').selectAll().execute()).length, 1);

    // The same email in another account is a new user; in the same account it is refused.
    const elsewhere = (await user('member@example.com', other)).id;
    assert.ok(elsewhere > gone, 'ids are not reused after a delete');
    await assert.rejects(user('member@example.com'));

    // References to users still hold: removing a user still removes what was theirs.
    await k.deleteFrom('users').where('id', '=', member).execute();
    assert.equal((await k.selectFrom('access_tokens').selectAll().execute()).length, 0);
    assert.equal((await k.selectFrom('form_permissions').selectAll().execute()).length, 0);
    await assert.rejects(
      k
        .insertInto('access_tokens')
        .values({ account_id: account, user_id: 999_999, token_hash: 'h2', kind: 'pat', name: 't', created_at: now })
        .execute(),
    );
    if (db.dialect === 'sqlite') {
      const [row] = (await sql<{ foreign_keys: number }>`PRAGMA foreign_keys`.execute(k)).rows;
      assert.equal(row?.foreign_keys, 1, 'foreign keys are on again');
    }
  });
});

describe(`0017: smart lists (${dialectName})`, () => {
  let fresh: Db;
  let drop: () => Promise<void>;

  before(async () => {
    if (TEST_PG_URL) {
      const pg = await createPgDatabase();
      fresh = openDatabase({ databaseUrl: pg.url, dataDir: tmpdir() });
      drop = pg.drop;
    } else {
      const dir = mkdtempSync(join(tmpdir(), 'formwork-migrations-'));
      fresh = openDatabase({ databaseUrl: undefined, dataDir: dir });
      drop = async () => rmSync(dir, { recursive: true, force: true });
    }
  });
  after(async () => {
    await fresh.close();
    await drop();
  });

  it('keeps the fields written before it with their own options, and lets fields point at a list', async () => {
    const k = fresh.kysely;
    // Whichever migration comes just before this one, so that renumbering the others changes nothing here.
    const index = MIGRATION_NAMES.indexOf('0017_smart_lists');
    assert.ok(index > 0);
    await migrateUpTo(fresh, MIGRATION_NAMES[index - 1]!);
    const now = Date.now();
    const account = (
      await k
        .insertInto('accounts')
        .values({ name: 'Before', created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    const form = (
      await k
        .insertInto('forms')
        .values({
          account_id: account,
          name: 'F',
          submit_button_title: 'Submit',
          settings: '{}',
          view_key: 'vk-lists',
          created_at: now,
          updated_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    const options = '[{"label":"A","value":"a"}]';
    // Written as the schema stood before the migration: no smart_list_id column yet.
    const field = (
      await sql<{
        id: number;
      }>`insert into fields (account_id, form_id, type, label, description, column_span, display_order, attributes, options, created_at, updated_at)
        values (${account}, ${form}, 'select', 'Pick', '', 12, 0, '{}', ${options}, ${now}, ${now}) returning id`.execute(
        k,
      )
    ).rows[0]!.id;

    assert.ok((await migrateToLatest(fresh)).includes('0017_smart_lists'));

    const before = await k.selectFrom('fields').selectAll().where('id', '=', field).executeTakeFirstOrThrow();
    assert.equal(before.options, options);
    assert.equal(before.smart_list_id, null);

    const list = (
      await k
        .insertInto('smart_lists')
        .values({ account_id: account, name: 'L', created_at: now, updated_at: now })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    const option = (value: string) =>
      k
        .insertInto('smart_list_options')
        .values({
          account_id: account,
          list_id: list,
          label: value,
          value,
          display_order: 0,
          image_key: null,
          created_at: now,
          updated_at: now,
        })
        .execute();
    await option('x');
    await assert.rejects(option('x'), 'a value is unique within its list');
    await k.updateTable('fields').set({ smart_list_id: list }).where('id', '=', field).execute();
    await assert.rejects(
      k.deleteFrom('smart_lists').where('id', '=', list).execute(),
      'a list that a field uses is not removed under it',
    );
    await assert.rejects(k.updateTable('fields').set({ smart_list_id: 999_999 }).where('id', '=', field).execute());
    await k.updateTable('fields').set({ smart_list_id: null }).where('id', '=', field).execute();
    await k.deleteFrom('smart_lists').where('id', '=', list).execute();
    assert.equal(
      (await k.selectFrom('smart_list_options').selectAll().execute()).length,
      0,
      'options go with the list',
    );
  });
});
