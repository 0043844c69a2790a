/**
 * Migrations that reshape tables holding data, run on rows written before them: nothing is
 * lost, references still hold, and the new rules apply.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.js';
import { MIGRATION_NAMES, migrateToLatest, migrateUpTo } from '../src/db/migrate.js';
import { dialectName, openFreshDatabase } from './support/helpers.js';

let db: Db;
let cleanup: () => Promise<void>;

before(async () => {
  ({ db, drop: cleanup } = await openFreshDatabase());
});
after(async () => {
  await cleanup();
});

/**
 * Brings target up to whichever migration comes just before `name`, so that renumbering the
 * others changes nothing in the test of `name`.
 */
async function migrateUpToBefore(target: Db, name: string): Promise<void> {
  const index = MIGRATION_NAMES.indexOf(name);
  assert.ok(index > 0, `${name} is not a migration after the first`);
  await migrateUpTo(target, MIGRATION_NAMES[index - 1]!);
}

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
      '0014_submission_counts',
      '0016_resume_link_mail',
      '0017_smart_lists',
      '0018_themes',
      '0019_subaccounts',
      '0020_portals',
      '0022_jobs_kind_due',
      '0024_docmerge',
      '0029_job_request_id',
      '0030_mail_log_created',
      '0031_portal_expiry',
      '0032_idempotency_expiry_index',
      '0033_drop_jobs_due',
      '0034_create_abort',
      '0035_search_pending_list',
      '0036_submission_cascades',
      '0037_submission_hour_ids',
      '0038_encrypted_prefills',
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

describe(`migration 0016 on the mail log (${dialectName})`, () => {
  it('keeps the messages logged before it, and then takes resume links without an email or a submission', async () => {
    const { db: own, drop } = await openFreshDatabase();
    try {
      const k = own.kysely;
      await migrateUpTo(own, '0013_hosted_forms');
      const now = Date.now();
      const account = (
        await k
          .insertInto('accounts')
          .values({ name: 'Mail', created_at: now })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
      const message = {
        account_id: account,
        form_id: 7,
        email_id: 3,
        submission_id: 11,
        job_id: 42,
        kind: 'notification' as const,
        sender: 'desk@example.com',
        recipients: '["team@example.com"]',
        reply_to: null,
        subject: 'New submission',
        text_body: 'Hello',
        html_body: '<p>Hello</p>',
        attachments: '[]',
        created_at: now,
      };
      const id = (await k.insertInto('mail_log').values(message).returning('id').executeTakeFirstOrThrow()).id;
      await migrateToLatest(own);
      const kept = await k.selectFrom('mail_log').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.deepEqual(kept, { id, ...message, partial_submission_id: null, portal_id: null });
      await k
        .insertInto('mail_log')
        .values({
          ...message,
          email_id: null,
          submission_id: null,
          partial_submission_id: 5,
          job_id: 43,
          kind: 'resume_link',
        })
        .execute();
      await assert.rejects(
        k
          .insertInto('mail_log')
          .values({ ...message, job_id: 42 })
          .execute(),
        'a job still writes one message',
      );
      const after = await k.selectFrom('mail_log').select('id').where('account_id', '=', account).execute();
      assert.equal(after.length, 2);
      assert.ok(after.every((r) => r.id > 0));
      assert.ok(Math.max(...after.map((r) => r.id)) > id, 'ids are not reused');
    } finally {
      await drop();
    }
  });
});

const hour = 3_600_000;
/** The start of an hour in January 2026: when the old rows below were written. */
const base = Math.floor(Date.UTC(2026, 0, 5) / hour) * hour;

/** A database of the describe block's own, opened before its tests and dropped after them. */
function ownDatabase(): () => Db {
  let db: Db | undefined;
  let drop: (() => Promise<void>) | undefined;
  before(async () => {
    ({ db, drop } = await openFreshDatabase());
  });
  after(async () => {
    await drop?.();
  });
  return () => db!;
}

/** Rows written as if before the migration under test: an account, and a form's submissions at times (their ids, in order). */
async function oldAccount(k: Db['kysely'], at: number): Promise<number> {
  return (
    await k.insertInto('accounts').values({ name: 'Old', created_at: at }).returning('id').executeTakeFirstOrThrow()
  ).id;
}

async function oldSubmissions(k: Db['kysely'], account: number, form: number, times: number[]): Promise<number[]> {
  const ids: number[] = [];
  for (const at of times) {
    const { id } = await k
      .insertInto('submissions')
      .values({
        account_id: account,
        form_id: form,
        created_at: at,
        updated_at: at,
        user_agent: 'old',
        remote_addr: '127.0.0.1',
        data: '{}',
        pretty_name: null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    ids.push(id);
  }
  return ids;
}

describe(`0014: submission counts leave the form's row (${dialectName})`, () => {
  const fresh = ownDatabase();

  it('carries each form’s count and version over, and counts the existing rows per hour', async () => {
    const k = fresh().kysely;
    await migrateUpTo(fresh(), '0013_hosted_forms');
    const account = await oldAccount(k, base);
    const form = async (key: string, count: number, version: number) =>
      (
        await sql<{ id: number }>`INSERT INTO forms (account_id, name, submit_button_title, settings, view_key,
          is_encrypted, inactive, submissions_count, revision, submissions_version, created_at, updated_at)
          VALUES (${account}, ${key}, 'Submit', '{}', ${key}, 0, 0, ${count}, 1, ${version}, ${base}, ${base})
          RETURNING id`.execute(k)
      ).rows[0]!.id;
    const busy = await form('busy', 5, 9);
    const empty = await form('empty', 0, 0);
    // Two rows in the first hour, three in the third.
    const ids = await oldSubmissions(k, account, busy, [
      base + 1,
      base + hour - 1,
      base + 2 * hour,
      base + 2 * hour + 5,
      base + 3 * hour - 1,
    ]);
    await migrateToLatest(fresh());

    const counts = await k.selectFrom('form_submission_counts').selectAll().orderBy('form_id').execute();
    assert.deepEqual(counts, [{ form_id: busy, slot: 0, n: 5, version: 9 }]);
    // With each hour's id bounds (0037).
    const hours = await k
      .selectFrom('submission_hours')
      .select(['form_id', 'hour', 'n', 'first_id', 'last_id'])
      .orderBy('hour')
      .execute();
    assert.deepEqual(hours, [
      { form_id: busy, hour: base / hour, n: 2, first_id: ids[0], last_id: ids[1] },
      { form_id: busy, hour: base / hour + 2, n: 3, first_id: ids[2], last_id: ids[4] },
    ]);
    const columns = await k.selectFrom('forms').selectAll().where('id', '=', empty).executeTakeFirstOrThrow();
    assert.equal('submissions_count' in columns, false, 'the old column is gone');
    // A form's rows go with it.
    await k.deleteFrom('submissions').execute();
    await k.deleteFrom('forms').where('id', '=', busy).execute();
    assert.equal((await k.selectFrom('form_submission_counts').selectAll().execute()).length, 0);
    assert.equal((await k.selectFrom('submission_hours').selectAll().execute()).length, 0);
  });
});

describe(`0037: each hour's id bounds (${dialectName})`, () => {
  const fresh = ownDatabase();

  it('bounds every hour that holds rows, on each of its slots, and drops an hour whose rows were all deleted', async () => {
    const k = fresh().kysely;
    await migrateUpToBefore(fresh(), '0037_submission_hour_ids');
    const account = await oldAccount(k, base);
    const form = (
      await sql<{ id: number }>`INSERT INTO forms (account_id, name, submit_button_title, settings, view_key,
        is_encrypted, inactive, revision, created_at, updated_at)
        VALUES (${account}, 'Busy', 'Submit', '{}', 'busy', 0, 0, 1, ${base}, ${base}) RETURNING id`.execute(k)
    ).rows[0]!.id;
    const ids = await oldSubmissions(k, account, form, [base + 1, base + 5, base + 9]);
    // The first hour: three created in slot 0, one of them (the one between) deleted through slot 1.
    await k.deleteFrom('submissions').where('id', '=', ids[1]!).execute();
    // The second hour: two created in slot 0, both deleted through slot 1, so no rows are left.
    const h = base / hour;
    await sql`INSERT INTO submission_hours (form_id, hour, slot, n) VALUES
      (${form}, ${h}, 0, 3), (${form}, ${h}, 1, -1), (${form}, ${h + 1}, 0, 2), (${form}, ${h + 1}, 1, -2)`.execute(k);
    await migrateToLatest(fresh());

    const hours = await k
      .selectFrom('submission_hours')
      .select(['hour', 'slot', 'n', 'first_id', 'last_id'])
      .orderBy('hour')
      .orderBy('slot')
      .execute();
    assert.deepEqual(hours, [
      { hour: h, slot: 0, n: 3, first_id: ids[0], last_id: ids[2] },
      { hour: h, slot: 1, n: -1, first_id: ids[0], last_id: ids[2] },
    ]);
  });
});

describe(`0038: clear prefill values of encrypted forms (${dialectName})`, () => {
  const fresh = ownDatabase();

  it("removes those of encrypted forms and keeps plain forms' and sealed ones", async () => {
    const k = fresh().kysely;
    await migrateUpToBefore(fresh(), '0038_encrypted_prefills');
    const account = await oldAccount(k, base);
    const form = async (viewKey: string, encrypted: number) =>
      (
        await sql<{ id: number }>`INSERT INTO forms (account_id, name, submit_button_title, settings, view_key,
          is_encrypted, inactive, revision, created_at, updated_at)
          VALUES (${account}, ${viewKey}, 'Submit', '{}', ${viewKey}, ${encrypted}, 0, 1, ${base}, ${base}) RETURNING id`.execute(
          k,
        )
      ).rows[0]!.id;
    const sealedForm = await form('sealed-form', 1);
    const plainForm = await form('plain-form', 0);
    const prefill = (id: string, formId: number, data: string) =>
      sql`INSERT INTO prefill_tokens (id, account_id, form_id, data, created_at, expires_at)
        VALUES (${id}, ${account}, ${formId}, ${data}, ${base}, ${base + hour})`.execute(k);
    await prefill('clear-of-encrypted', sealedForm, '{"1":"Ann"}');
    await prefill('sealed-of-encrypted', sealedForm, 'fenc1:AAAA');
    await prefill('clear-of-plain', plainForm, '{"1":"Bob"}');
    await migrateToLatest(fresh());
    const left = await sql<{ id: string }>`SELECT id FROM prefill_tokens ORDER BY id`.execute(k);
    assert.deepEqual(
      left.rows.map((r) => r.id),
      ['clear-of-plain', 'sealed-of-encrypted'],
    );
  });
});

describe(`0017: smart lists (${dialectName})`, () => {
  const fresh = ownDatabase();

  it('keeps the fields written before it with their own options, and lets fields point at a list', async () => {
    const k = fresh().kysely;
    await migrateUpToBefore(fresh(), '0017_smart_lists');
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

    assert.ok((await migrateToLatest(fresh())).includes('0017_smart_lists'));

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

describe(`0018 and 0019: themes and subaccounts (${dialectName})`, () => {
  const fresh = ownDatabase();

  it('gives every existing account a default theme and puts its forms on it; accounts may have a parent', async () => {
    const k = fresh().kysely;
    await migrateUpToBefore(fresh(), '0018_themes');
    const now = Date.now();
    const accounts: number[] = [];
    for (const name of ['One', 'Two'])
      accounts.push(
        (await k.insertInto('accounts').values({ name, created_at: now }).returning('id').executeTakeFirstOrThrow()).id,
      );
    const forms: number[] = [];
    for (const [i, account] of [accounts[0]!, accounts[0]!, accounts[1]!].entries())
      forms.push(
        (
          await sql<{
            id: number;
          }>`insert into forms (account_id, name, submit_button_title, settings, view_key, created_at, updated_at)
            values (${account}, ${`F${i}`}, 'Submit', '{}', ${`vk-themes-${i}`}, ${now}, ${now}) returning id`.execute(
            k,
          )
        ).rows[0]!.id,
      );
    const revisions = await k.selectFrom('forms').select(['id', 'revision']).orderBy('id').execute();

    const applied = await migrateToLatest(fresh());
    assert.ok(applied.includes('0018_themes') && applied.includes('0019_subaccounts'));

    const themes = await k.selectFrom('themes').selectAll().orderBy('account_id').execute();
    assert.deepEqual(
      themes.map((t) => [t.account_id, t.is_default, t.name]),
      [
        [accounts[0], 1, 'Default'],
        [accounts[1], 1, 'Default'],
      ],
    );
    for (const t of themes) assert.match(t.id, /^th_[A-Za-z0-9_-]{16}$/);
    const after = await k
      .selectFrom('forms')
      .select(['id', 'account_id', 'theme_id', 'revision'])
      .orderBy('id')
      .execute();
    for (const [i, f] of after.entries()) {
      assert.equal(f.theme_id, themes.find((t) => t.account_id === f.account_id)!.id);
      assert.equal(Number(f.revision), Number(revisions[i]!.revision) + 1, 'cached reads of the form are built again');
    }
    // One default per account; a theme in use is not removed under its forms.
    await assert.rejects(
      k
        .insertInto('themes')
        .values({
          id: 'th_AAAAAAAAAAAAAAAA',
          account_id: accounts[0]!,
          name: 'Second default',
          is_default: 1,
          style: '{}',
          custom_css: '',
          created_at: now,
          updated_at: now,
        })
        .execute(),
    );
    await assert.rejects(k.deleteFrom('themes').where('id', '=', themes[0]!.id).execute());
    // A subaccount row points at its parent.
    const child = (
      await k
        .insertInto('accounts')
        .values({ name: 'Child', created_at: now, parent_account_id: accounts[0]! })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
    const row = await k.selectFrom('accounts').selectAll().where('id', '=', child).executeTakeFirstOrThrow();
    assert.equal(row.parent_account_id, accounts[0]);
    assert.equal(forms.length, 3);
  });
});

describe(`0020: portals (${dialectName})`, () => {
  it('keeps the mail logged before it, takes sign-in mail without a form, and ties submissions that go with them', async () => {
    const { db: own, drop } = await openFreshDatabase();
    try {
      const k = own.kysely;
      await migrateUpToBefore(own, '0020_portals');
      const now = Date.now();
      const account = (
        await k
          .insertInto('accounts')
          .values({ name: 'Portals', created_at: now })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
      const message = {
        account_id: account,
        form_id: 7,
        email_id: null,
        submission_id: null,
        partial_submission_id: 5,
        job_id: 42,
        kind: 'resume_link' as const,
        sender: 'desk@example.com',
        recipients: '["someone@example.com"]',
        reply_to: null,
        subject: 'Your link',
        text_body: 'Hello',
        html_body: null,
        attachments: '[]',
        created_at: now,
      };
      const id = (await k.insertInto('mail_log').values(message).returning('id').executeTakeFirstOrThrow()).id;
      assert.ok((await migrateToLatest(own)).includes('0020_portals'));
      const kept = await k.selectFrom('mail_log').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.deepEqual(kept, { id, ...message, portal_id: null });
      await k
        .insertInto('mail_log')
        .values({
          ...message,
          form_id: null,
          partial_submission_id: null,
          portal_id: 3,
          job_id: 43,
          kind: 'portal_signin',
        })
        .execute();
      assert.ok(
        (await k.selectFrom('mail_log').select('id').where('job_id', '=', 43).executeTakeFirstOrThrow()).id > id,
        'ids are not reused',
      );

      // A submission tied to a portal user goes with the submission, and with the user.
      const form = (
        await k
          .insertInto('forms')
          .values({
            account_id: account,
            name: 'F',
            submit_button_title: 'Submit',
            settings: '{}',
            view_key: 'vk-portals',
            created_at: now,
            updated_at: now,
          })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
      const portal = (
        await k
          .insertInto('portals')
          .values({
            account_id: account,
            name: 'P',
            description: null,
            portal_key: 'pk',
            avatar_key: null,
            avatar_type: null,
            avatar_size: null,
            created_at: now,
            updated_at: now,
          })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
      const user = (
        await k
          .insertInto('portal_users')
          .values({
            portal_id: portal,
            account_id: account,
            email: 'A@example.com',
            email_key: 'a@example.com',
            name: 'A',
            last_sign_in_at: null,
            created_at: now,
            updated_at: now,
          })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id;
      await assert.rejects(
        k
          .insertInto('portal_users')
          .values({
            portal_id: portal,
            account_id: account,
            email: 'a@example.com',
            email_key: 'a@example.com',
            name: 'Again',
            created_at: now,
            updated_at: now,
          })
          .execute(),
        'one user per address in a portal',
      );
      const submission = (
        await sql<{
          id: number;
        }>`insert into submissions (account_id, form_id, created_at, updated_at, user_agent, remote_addr, data)
          values (${account}, ${form}, ${now}, ${now}, '', '', '{}') returning id`.execute(k)
      ).rows[0]!.id;
      await k
        .insertInto('portal_submissions')
        .values({ submission_id: submission, portal_user_id: user, form_id: form, created_at: now })
        .execute();
      await k.deleteFrom('submissions').where('id', '=', submission).execute();
      assert.equal((await k.selectFrom('portal_submissions').selectAll().execute()).length, 0);
      await k.deleteFrom('portals').where('id', '=', portal).execute();
      assert.equal((await k.selectFrom('portal_users').selectAll().execute()).length, 0, 'users go with the portal');
    } finally {
      await drop();
    }
  });
});
