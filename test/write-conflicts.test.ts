/**
 * Writes that meet other writes, answered as a client can act on them, never 500:
 * - a write that PostgreSQL ends to break a deadlock wrote nothing, and the same request made
 *   again would pass: 503 database_busy with Retry-After, as SQLite's lock held past its wait
 *   is (test/sqlite-shared-file.test.ts). SQLite has one writer at a time and no deadlock;
 * - an update whose row a delete removed after the request read it is the 404 a later update
 *   gets (on SQLite a write transaction reads and writes under one lock and never meets it;
 *   on PostgreSQL it can).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { transact } from '../src/db/transaction.js';
import { NotFoundError, ServiceUnavailableError } from '../src/errors.js';
import * as docmerge from '../src/modules/docmerge/repository.js';
import * as emails from '../src/modules/emails/repository.js';
import * as fields from '../src/modules/fields/repository.js';
import * as forms from '../src/modules/forms/repository.js';
import * as portals from '../src/modules/portals/repository.js';
import * as smartlists from '../src/modules/smartlists/repository.js';
import * as themes from '../src/modules/themes/repository.js';
import * as users from '../src/modules/users/repository.js';
import * as webhooks from '../src/modules/webhooks/repository.js';
import { dialectName, withApps, type TestAccount, type TestApp } from './support/helpers.js';

describe(`writes that meet other writes (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  withApps((apps) => ({ app, a } = apps), 1);

  it(
    'a write PostgreSQL ends to break a deadlock is a 503 database_busy, retryable, and leaves nothing written',
    { skip: dialectName !== 'postgres' },
    async () => {
      const db = app.server.ctx.db;
      const one = (await a.post('/forms', { name: 'One' })).body.id as number;
      const two = (await a.post('/forms', { name: 'Two' })).body.id as number;
      // Each transaction renames its first form, waits until the other has renamed its own, then
      // renames the other's: a cycle, which PostgreSQL breaks by ending one of them.
      let bothHold!: () => void;
      const held = new Promise<void>((resolve) => (bothHold = resolve));
      let holding = 0;
      const rename = (first: number, second: number, name: string) =>
        transact(db, async (trx) => {
          await trx.updateTable('forms').set({ name }).where('id', '=', first).execute();
          if (++holding === 2) bothHold();
          await held;
          await trx.updateTable('forms').set({ name }).where('id', '=', second).execute();
        });
      const outcomes = await Promise.allSettled([rename(one, two, 'A'), rename(two, one, 'B')]);

      const failed = outcomes.filter((o) => o.status === 'rejected');
      assert.equal(failed.length, 1, 'one of the two ended, the other went through');
      const error = failed[0]!.reason as unknown;
      assert.ok(error instanceof ServiceUnavailableError, String(error));
      assert.equal(error.code, 'database_busy');
      assert.equal(error.retryAfterSeconds, 1);
      // The one that went through renamed both; nothing of the other stayed.
      const names = await db.selectFrom('forms').select('name').where('id', 'in', [one, two]).execute();
      assert.equal(new Set(names.map((n) => n.name)).size, 1);
    },
  );
  it(
    "a form permission given while the member's delete is under way waits for it and is the 404, not the foreign key's 400",
    { skip: dialectName !== 'postgres' },
    async () => {
      const db = app.server.ctx.db;
      const form = (await a.post('/forms', { name: 'Held' })).body.id as number;
      const member = (await a.post('/users', { email: 'held-member@example.com', name: 'M', role: 'member' })).body
        .id as number;
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let deleted!: () => void;
      const deleting = new Promise<void>((resolve) => (deleted = resolve));
      const deletion = transact(db, async (trx) => {
        await users.deleteUser(trx, a.accountId, member);
        deleted();
        await released;
      });
      await deleting;
      const put = a.put(`/users/${member}/permissions/${form}`, { level: 'view' });
      // The request has reached the user's row when it waits on the delete's lock.
      for (let i = 0; i < 500; i++) {
        const waiting = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`.execute(
          db,
        );
        if (waiting.rows[0]!.n > 0) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      release();
      await deletion;
      const res = await put;
      assert.equal(res.status, 404, res.text);
      assert.equal(res.body.code, 'user_not_found');
    },
  );
  // What an update finds when a delete committed after the request read the row: no row. A
  // race through the API hits that window too seldom to test; the update itself is tested here.
  it("an update of a row deleted meanwhile is its resource's 404, not Kysely's NoResultError (a 500)", async () => {
    const db = app.server.ctx.db;
    const gone = 999_999;
    const cases: [string, () => Promise<unknown>][] = [
      ['integration_not_found', () => docmerge.updateIntegration(db, gone, { name: 'x' })],
      ['field_not_found', () => fields.updateField(db, a.accountId, gone, { label: 'x' })],
      ['form_not_found', () => forms.updateForm(db, a.accountId, gone, { name: 'x' })],
      ['portal_not_found', () => portals.updatePortal(db, gone, { name: 'x' }, 1)],
      ['portal_user_not_found', () => portals.updatePortalUser(db, gone, { name: 'x' }, 1)],
      ['smart_list_not_found', () => smartlists.updateList(db, a.accountId, gone, { name: 'x' }, 1)],
      ['smart_list_option_not_found', () => smartlists.updateOption(db, gone, { label: 'x' }, 1)],
      ['smart_list_option_not_found', () => smartlists.setOptionImage(db, gone, null, 1)],
      ['theme_not_found', () => themes.updateTheme(db, a.accountId, 'gone', { name: 'x', updated_at: 1 })],
      ['user_not_found', () => users.updateUser(db, a.accountId, gone, { name: 'x' })],
      ['webhook_not_found', () => webhooks.updateWebhook(db, a.accountId, gone, { url: 'https://x.test' })],
    ];
    for (const [code, update] of cases) {
      await assert.rejects(update, (error: unknown) => error instanceof NotFoundError && error.code === code, code);
    }
    // An email's kind is the service's to name (confirmation or notification).
    assert.equal(await emails.updateEmail(db, a.accountId, gone, { subject: 'x' }), undefined);
  });
});
