/** The v2 webhook, confirmation, notification and partial-submission paths (docs/v2.md). */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { savePartialOf } from './support/partials.js';
import { assertDeleted, assertV2Error, ok, v2, V2_TIME } from './support/v2.js';

describe(`v2 webhooks, emails and partial submissions (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  let call: ReturnType<typeof v2>;
  let form: any;

  before(async () => {
    app = await startTestApp();
    [a, b] = await Promise.all([app.account('A'), app.account('B')]);
    call = v2(app, a.token);
    form = ok(await a.post('/forms', { name: 'Hooked', fields: [{ type: 'email', label: 'Email' }] }));
  });
  after(() => app.close());

  it('adds, lists, reads, changes and deletes a webhook; secrets never shown again', async () => {
    const hook = ok(
      await call('POST', `/form/${form.id}/webhook.json`, {
        url: 'https://example.com/hook',
        include_field_type: '1',
        handshake_key: 'k3y-value-xyz',
      }),
      201,
    );
    assert.equal(hook.form, String(form.id));
    assert.equal(hook.include_field_type, true);
    assert.equal(hook.handshake_key_set, true);
    assert.equal(typeof hook.id, 'string');
    const list = ok(await call('GET', `/form/${form.id}/webhook`));
    assert.deepEqual(
      list.webhooks.map((w: any) => w.id),
      [hook.id],
    );
    const read = await call('GET', `/webhook/${hook.id}.json`);
    assert.ok(!read.text.includes('k3y-value-xyz'));
    const changed = ok(
      await call(
        'PUT',
        `/webhook/${hook.id}`,
        { url: 'https://example.com/other', content_type: 'urlencoded' },
        'json',
      ),
    );
    assert.equal(changed.content_type, 'urlencoded');
    assert.equal(ok(await a.get(`/webhook/${hook.id}`)).url, 'https://example.com/other');
    assertV2Error(await v2(app, b.token)('GET', `/webhook/${hook.id}`), 404);
    assertDeleted(await call('DELETE', `/webhook/${hook.id}.json`), hook.id);
  });

  it('adds, reads, changes and deletes confirmation and notification emails', async () => {
    const confirmation = ok(
      await call('POST', `/form/${form.id}/confirmation`, {
        subject: 'Thanks',
        message: 'Got it',
        recipient_field: form.fields[0].id,
      }),
      201,
    );
    assert.equal(confirmation.recipient_field, String(form.fields[0].id));
    assert.equal(ok(await call('PUT', `/confirmation/${confirmation.id}.json`, { name: 'Renamed' })).name, 'Renamed');
    assert.equal(ok(await call('GET', `/form/${form.id}/confirmation.json`)).confirmations.length, 1);
    const notification = ok(
      await call('POST', `/form/${form.id}/notification.json`, {
        subject: 'New',
        message: 'See',
        recipients: 'team@example.com,boss@example.com',
      }),
      201,
    );
    assert.deepEqual(notification.recipients, ['team@example.com', 'boss@example.com']);
    assert.match(notification.created, V2_TIME);
    assert.equal(ok(await call('GET', `/notification/${notification.id}`)).subject, 'New');
    assertV2Error(await v2(app, b.token)('GET', `/notification/${notification.id}`), 404);
    assertDeleted(await call('DELETE', `/notification/${notification.id}`), notification.id);
    assertDeleted(await call('DELETE', `/confirmation/${confirmation.id}.json`), confirmation.id);
  });

  it('answers times in Eastern Time, and text that looks like a time as it was written', async () => {
    const iso = '2025-01-01T00:00:00Z';
    const notification = ok(
      await call('POST', `/form/${form.id}/notification`, {
        name: iso,
        subject: iso,
        message: iso,
        recipients: 'a@example.com',
      }),
      201,
    );
    for (const read of [
      notification,
      ok(await call('GET', `/notification/${notification.id}`)),
      ok(await call('GET', `/form/${form.id}/notification`)).notifications[0],
    ]) {
      assert.deepEqual([read.name, read.subject, read.message], [iso, iso, iso]);
      assert.match(read.created, V2_TIME);
      assert.match(read.updated, V2_TIME);
    }
    // Written back as read, the text stays as it was.
    ok(await call('PUT', `/notification/${notification.id}`, { subject: notification.subject }));
    assert.equal(ok(await a.get(`/notifications/${notification.id}`)).subject, iso);
    assertDeleted(await call('DELETE', `/notification/${notification.id}`), notification.id);
    const hook = ok(
      await call('POST', `/form/${form.id}/webhook`, { url: 'https://example.com/2025-01-01T00:00:00Z' }),
      201,
    );
    assert.match(hook.created, V2_TIME);
    assert.equal(hook.failed, null);
    assert.match(ok(await call('GET', `/webhook/${hook.id}`)).updated, V2_TIME);
    assertDeleted(await call('DELETE', `/webhook/${hook.id}`), hook.id);
  });

  it('lists, reads and deletes partial submissions', async () => {
    assert.deepEqual(ok(await call('GET', `/form/${form.id}/partialsubmission.json`)).partial_submissions, []);
    const saved = await savePartialOf(app, a, form.id, [{ id: form.fields[0].id, value: 'ann@example.com' }]);
    const list = ok(await call('GET', `/form/${form.id}/partialsubmission?per_page=5`));
    assert.equal(list.total, 1);
    assert.deepEqual(
      list.partial_submissions.map((p: any) => [p.id, p.form]),
      [[String(saved.id), String(form.id)]],
    );
    // search_field_n/search_value_n as on submissions (and as search[n] on v2025's list).
    const email = form.fields[0].id;
    const search = (value: string) =>
      `/form/${form.id}/partialsubmission.json?search_field_0=${email}&search_value_0=${value}`;
    assert.equal(ok(await call('GET', search('nomatch'))).total, 0);
    assert.deepEqual(ok(await call('GET', search('nomatch'))).partial_submissions, []);
    assert.equal(
      ok(await a.get(`/form/${form.id}/partialsubmission?search[0][fieldId]=${email}&search[0][value]=nomatch`)).total,
      0,
    );
    assert.equal(ok(await call('GET', search('ann@example.com'))).total, 1);
    assert.equal(
      ok(await call('GET', `${search('ann@example.com')}&search_field_1=${email}&search_value_1=bob`)).total,
      0,
    );
    assertV2Error(await call('GET', `/form/${form.id}/partialsubmission?search_field_0=abc&search_value_0=x`), 400);
    const one = ok(await call('GET', `/partialsubmission/${saved.id}.json`));
    assert.equal(one.id, String(saved.id));
    assert.match(one.timestamp, V2_TIME);
    assert.match(one.expires, V2_TIME);
    assert.equal(one.data[form.fields[0].id].value, 'ann@example.com');
    assertV2Error(await v2(app, b.token)('GET', `/partialsubmission/${saved.id}`), 404);
    assertDeleted(await call('DELETE', `/partialsubmission/${saved.id}.json`), saved.id);
    assertV2Error(await call('GET', `/partialsubmission/${saved.id}`), 404);
  });
});
