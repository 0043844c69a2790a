/**
 * Two edits of one submission at once, each naming other fields: an edit changes only the
 * fields it names (docs/api.md), so both land whichever commits first, and neither answers 200
 * having been overwritten. Each round sends the two edits together and then reads what is
 * stored: to one process (on SQLite both may share a group commit), to two processes on one
 * database (each its own connection and batch), and on an encrypted form, whose stored text
 * is sealed afresh by every write. The edits must also keep what goes with them: the unique
 * value, the search index, the form's count and one outbox row per edit that answered 200.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { unpackSubmission } from '../src/modules/submissions/packed-entries.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { ok } from './support/submission-fixtures.js';

const ROUNDS = 25;
const PASSWORD = 'correct horse battery staple';
const sealedHeader = { headers: { 'x-formwork-encryption-password': PASSWORD } };

interface RaceForm {
  id: number;
  /** Text fields: the first edit writes x, the second y. */
  x: number;
  y: number;
  /** A unique email field, which the first edit changes with x. */
  email: number;
}

const valueOf = (submission: any, fieldId: number): unknown =>
  submission.data.find((d: any) => d.field === fieldId)?.value;

describe(`two edits of one submission at once (${dialectName})`, () => {
  let app: TestApp;
  let second: TestApp;
  let receiver: Receiver;
  let a: TestAccount;
  /** The same account's token, sent to the second process. */
  let a2: Pick<TestAccount, 'put'>;

  before(async () => {
    // One SECRET_KEY for both processes, as in any deployment: unique values of an encrypted
    // form are stored as HMACs under it.
    const env = {
      SECRET_KEY: 'submission-edit-race-secret-key-0123456789',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      ENCRYPTION_PASSWORD_ATTEMPTS: '100000',
    };
    app = await startTestApp(env);
    second = await startTestApp(env, app);
    receiver = await startReceiver();
    a = await app.account();
    a2 = {
      put: (path, body, options) => second.request('PUT', `/api/v2025${path}`, { token: a.token, body, ...options }),
    };
  });
  after(async () => {
    await second?.close();
    await app?.close();
    await receiver?.close();
  });

  async function makeForm(name: string, encrypted: boolean): Promise<RaceForm> {
    const form = await ok(
      a.post('/forms', {
        name,
        ...(encrypted && { isEncrypted: true, encryptionPassword: PASSWORD }),
        fields: [
          { type: 'text', label: 'X' },
          { type: 'text', label: 'Y' },
          { type: 'email', label: 'Email', unique: true },
        ],
      }),
      'create form',
    );
    const [x, y, email] = form.fields.map((f: any) => f.id as number);
    await ok(
      a.post(`/form/${form.id}/webhook`, { url: `${receiver.url}/hook`, events: ['submission.updated'] }),
      'webhook',
    );
    return { id: form.id, x: x!, y: y!, email: email! };
  }

  /** The submission.updated events the outbox holds for a submission, as their records. */
  async function updateEvents(submissionId: number): Promise<any[]> {
    const rows = await app.server.ctx.db
      .selectFrom('jobs')
      .select('payload')
      .where('payload', 'like', '%submission.updated%')
      .execute();
    return rows
      .map((r) => JSON.parse(r.payload).event)
      .filter((e: any) => e?.type === 'submission.updated' && e.submissionId === submissionId)
      .map((e: any) => e.submission && unpackSubmission(e.submission));
  }

  async function race(
    form: RaceForm,
    secondPut: Pick<TestAccount, 'put'>,
    options: { sealed: boolean; tag: string },
  ): Promise<void> {
    const read = options.sealed ? sealedHeader : undefined;
    const created = await ok(
      a.post(`/forms/${form.id}/submissions`, {
        fields: [
          { id: form.x, value: 'x-start' },
          { id: form.y, value: 'y-start' },
          { id: form.email, value: `${options.tag}-start@example.com` },
        ],
      }),
      'create',
    );
    const path = `/submissions/${created.id}`;
    const lost: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const [first, other] = await Promise.all([
        a.put(
          path,
          {
            fields: [
              { id: form.x, value: `x${i}` },
              { id: form.email, value: `${options.tag}-${i}@example.com` },
            ],
          },
          read,
        ),
        secondPut.put(path, { fields: [{ id: form.y, value: `y${i}` }] }, read),
      ]);
      assert.equal(first.status, 200, `round ${i}, first edit: ${first.text.slice(0, 300)}`);
      assert.equal(other.status, 200, `round ${i}, second edit: ${other.text.slice(0, 300)}`);
      // Each answer holds its own change, and the one that committed last holds both.
      assert.equal(valueOf(first.body, form.x), `x${i}`);
      assert.equal(valueOf(other.body, form.y), `y${i}`);
      const both = (s: any) => valueOf(s, form.x) === `x${i}` && valueOf(s, form.y) === `y${i}`;
      const stored = await ok(a.get(path, read), 'read');
      if (!both(stored)) lost.push(`round ${i}: x=${valueOf(stored, form.x)} y=${valueOf(stored, form.y)}`);
      else if (!both(first.body) && !both(other.body)) lost.push(`round ${i}: neither answer holds both edits`);
    }
    assert.deepEqual(lost, [], `edits lost in ${lost.length} of ${ROUNDS} rounds`);

    const last = ROUNDS - 1;
    const stored = await ok(a.get(path, read), 'read');
    assert.equal(valueOf(stored, form.email), `${options.tag}-${last}@example.com`);
    // The unique value moved with each edit: the last one is held, an earlier one free again.
    const taken = await a.post(`/forms/${form.id}/submissions`, {
      fields: [{ id: form.email, value: `${options.tag}-${last}@example.com` }],
    });
    assert.equal(taken.status, 400, taken.text);
    assert.equal(taken.body.code, 'not_unique');
    const freed = await ok(
      a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.email, value: `${options.tag}-0@example.com` }] }),
      'a value an edit gave up',
    );
    assert.equal((await ok(a.get(`/forms/${form.id}`), 'form')).submissionsCount, 2);
    // The index holds what is stored now, and nothing an edit replaced.
    const search = (fieldId: number, value: string) =>
      ok(
        a.get(
          `/forms/${form.id}/submissions?search[0][fieldId]=${fieldId}&search[0][value]=${encodeURIComponent(value)}`,
          read,
        ),
        'search',
      );
    assert.deepEqual(
      (await search(form.y, `y${last}`)).submissions.map((s: any) => s.id),
      [created.id],
    );
    assert.deepEqual(
      (await search(form.x, `x${last}`)).submissions.map((s: any) => s.id),
      [created.id],
    );
    assert.equal((await search(form.y, `y${last - 1}`)).total, 0);
    assert.equal((await search(form.y, 'y-start')).total, 0);
    // Another submission (ids are drawn ahead per process on PostgreSQL, so not in order across two).
    assert.notEqual(freed.id, created.id);

    // One outbox row for each edit that answered 200, none for an attempt made again, and (on
    // a plain form, whose events carry the values) each round's last commit carries both.
    const events = await updateEvents(created.id);
    assert.equal(events.length, 2 * ROUNDS);
    if (!options.sealed) {
      const pairs = new Set(events.map((s) => `${valueOf(s, form.x)} ${valueOf(s, form.y)}`));
      for (let i = 0; i < ROUNDS; i++) assert.ok(pairs.has(`x${i} y${i}`), `round ${i}: no event holds both edits`);
    }
  }

  it('keeps both edits when one process gets them', async () => {
    await race(await makeForm('One process', false), a, { sealed: false, tag: 'one' });
  });

  it('keeps both edits when two processes on one database get them', async () => {
    await race(await makeForm('Two processes', false), a2, { sealed: false, tag: 'two' });
  });

  it('keeps both edits of a submission of an encrypted form', async () => {
    await race(await makeForm('Encrypted', true), a2, { sealed: true, tag: 'sealed' });
  });
});
