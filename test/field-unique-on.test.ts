import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, dumpData, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

const PASSWORD = 'correct horse battery';
const withPassword = (password = PASSWORD) => ({ headers: { 'x-formwork-encryption-password': password } });

/**
 * Making a field unique, or changing what a unique field's values normalize to, stores the
 * values that the form's existing submissions hold, as their creates would have: two
 * submissions may then not hold one value, old or new.
 */
describe(`a field made unique holds its existing values (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
  });
  after(() => app.close());

  async function form(fields: unknown[], extra: Record<string, unknown> = {}) {
    const res = await a.post('/forms', { name: 'Unique later', fields, ...extra });
    assert.equal(res.status, 200, res.text);
    return { id: res.body.id as number, fields: res.body.fields.map((f: { id: number }) => f.id) as number[] };
  }
  async function submit(formId: number, fields: { id: number; value: unknown }[], options?: object) {
    return a.post(`/forms/${formId}/submissions`, { fields }, options);
  }
  async function submitted(formId: number, fields: { id: number; value: unknown }[]): Promise<number> {
    const res = await submit(formId, fields);
    assert.equal(res.status, 200, res.text);
    return res.body.id;
  }
  const uniqueRows = async (fieldId: number) =>
    app.server.ctx.db
      .selectFrom('submission_unique_values')
      .select(['submission_id', 'value_norm'])
      .where('field_id', '=', fieldId)
      .orderBy('submission_id')
      .execute();

  it('refuses a new submission with a value an older one holds, once unique is turned on', async () => {
    const f = await form([{ type: 'text', label: 'Code' }]);
    const [code] = f.fields as [number];
    await submitted(f.id, [{ id: code, value: 'qq' }]);
    const on = await a.put(`/forms/${f.id}/fields/${code}`, { unique: true });
    assert.equal(on.status, 200, on.text);
    assert.equal(on.body.unique, true);
    const again = await submit(f.id, [{ id: code, value: ' QQ ' }]);
    assert.equal(again.status, 400, `a duplicate of an older value went in: ${again.text}`);
    assert.equal(again.body.code, 'not_unique');
    assert.equal((await submit(f.id, [{ id: code, value: 'other' }])).status, 200);
  });

  it('enforces it on every old row alike, whether or not the row was edited since', async () => {
    const f = await form([
      { type: 'email', label: 'Email' },
      { type: 'text', label: 'Note' },
    ]);
    const [email, note] = f.fields as [number, number];
    const first = await submitted(f.id, [{ id: email, value: 'one@example.com' }]);
    const second = await submitted(f.id, [{ id: email, value: 'two@example.com' }]);
    assert.equal((await a.put(`/forms/${f.id}/fields/${email}`, { unique: true })).status, 200);
    // An edit of another field of an old row writes that row's unique values again.
    const edit = await a.put(`/submissions/${second}`, { fields: [{ id: note, value: 'edited' }] });
    assert.equal(edit.status, 200, edit.text);
    for (const taken of ['one@example.com', 'two@example.com']) {
      const res = await submit(f.id, [{ id: email, value: taken }]);
      assert.equal(res.status, 400, `${taken}: ${res.text}`);
      assert.equal(res.body.code, 'not_unique');
    }
    // An edit of the unique field of one old row is checked against the other.
    const clash = await a.put(`/submissions/${first}`, { fields: [{ id: email, value: 'two@example.com' }] });
    assert.equal(clash.status, 400, clash.text);
    assert.equal(clash.body.code, 'not_unique');
    const moved = await a.put(`/submissions/${first}`, { fields: [{ id: email, value: 'three@example.com' }] });
    assert.equal(moved.status, 200, moved.text);
    assert.equal((await submit(f.id, [{ id: email, value: 'one@example.com' }])).status, 200, 'a value let go is free');
  });

  it('refuses with 409, changing nothing, when existing submissions already hold one value twice', async () => {
    const f = await form([
      { type: 'text', label: 'Ticket' },
      { type: 'text', label: 'Other' },
    ]);
    const [ticket] = f.fields as [number];
    const x = await submitted(f.id, [{ id: ticket, value: 'T-1' }]);
    await submitted(f.id, [{ id: ticket, value: 'T-2' }]);
    const y = await submitted(f.id, [{ id: ticket, value: 't-1 ' }]);
    const before = await dumpData(app);
    const res = await a.put(`/forms/${f.id}/fields/${ticket}`, { unique: true, label: 'Ticket no.' });
    assert.equal(res.status, 409, res.text);
    assert.equal(res.body.code, 'duplicate');
    assert.deepEqual(res.body.details, [
      { property: 'body.unique', message: `submissions ${x} and ${y} hold the same value` },
    ]);
    assert.match(res.body.error, new RegExp(`submissions ${x} and ${y}`));
    assert.equal(await dumpData(app), before, 'the refused change wrote nothing');
    const field = (await a.get(`/forms/${f.id}/fields/${ticket}`)).body;
    assert.equal(field.unique, false);
    assert.equal(field.label, 'Ticket');
    // Once one of them lets the value go, the change goes through.
    assert.equal((await a.put(`/submissions/${y}`, { fields: [{ id: ticket, value: 'T-3' }] })).status, 200);
    assert.equal((await a.put(`/forms/${f.id}/fields/${ticket}`, { unique: true })).status, 200);
    assert.equal((await submit(f.id, [{ id: ticket, value: 'T-3' }])).status, 400);
  });

  it('stores the values anew when a unique field changes type or option labels, and removes them when unique is turned off', async () => {
    const f = await form([
      {
        type: 'radio',
        label: 'Seat',
        unique: true,
        options: [
          { label: 'Window', value: 'w' },
          { label: 'Aisle', value: 'a' },
        ],
      },
    ]);
    const [seat] = f.fields as [number];
    const held = await submitted(f.id, [{ id: seat, value: 'w' }]);
    assert.deepEqual(await uniqueRows(seat), [{ submission_id: held, value_norm: 'window' }]);

    // A radio value is shown, and so normalized, by its option's label.
    const relabelled = await a.put(`/forms/${f.id}/fields/${seat}`, {
      options: [
        { label: 'By the window', value: 'w' },
        { label: 'Aisle', value: 'a' },
      ],
    });
    assert.equal(relabelled.status, 200, relabelled.text);
    assert.deepEqual(await uniqueRows(seat), [{ submission_id: held, value_norm: 'by the window' }]);
    const twice = await submit(f.id, [{ id: seat, value: 'w' }]);
    assert.equal(twice.status, 400, `the relabelled value was taken twice: ${twice.text}`);

    const text = await a.put(`/forms/${f.id}/fields/${seat}`, { type: 'text' });
    assert.equal(text.status, 200, text.text);
    assert.deepEqual(await uniqueRows(seat), [{ submission_id: held, value_norm: 'w' }]);
    const taken = await submit(f.id, [{ id: seat, value: 'W' }]);
    assert.equal(taken.status, 400, `a value held before the type changed went in again: ${taken.text}`);
    const other = await submitted(f.id, [{ id: seat, value: 'x' }]);

    // Values that differ as text may be one value of the new type.
    const collide = await a.put(`/forms/${f.id}/fields/${seat}`, {
      type: 'radio',
      options: [
        { label: 'Same', value: 'w' },
        { label: 'Same', value: 'x' },
      ],
    });
    assert.equal(collide.status, 409, collide.text);
    assert.deepEqual(collide.body.details, [
      { property: 'body.type', message: `submissions ${held} and ${other} hold the same value` },
    ]);
    assert.equal((await a.get(`/forms/${f.id}/fields/${seat}`)).body.type, 'text');

    assert.equal((await a.put(`/forms/${f.id}/fields/${seat}`, { unique: false })).status, 200);
    assert.deepEqual(await uniqueRows(seat), [], 'a field that is not unique keeps no unique values');
    assert.equal((await submit(f.id, [{ id: seat, value: 'w' }])).status, 200);
    assert.equal((await a.put(`/forms/${f.id}/fields/${seat}`, { unique: true })).status, 409, "'w' is held twice now");
    assert.deepEqual(await uniqueRows(seat), []);

    // Deleting a field takes its unique values with it.
    const kept = await form([{ type: 'text', label: 'Kept', unique: true }]);
    await submitted(kept.id, [{ id: kept.fields[0]!, value: 'k' }]);
    assert.equal((await uniqueRows(kept.fields[0]!)).length, 1);
    assert.equal((await a.delete(`/forms/${kept.id}/fields/${kept.fields[0]}`)).status, 200);
    assert.deepEqual(await uniqueRows(kept.fields[0]!), []);
  });

  it('needs the password of an encrypted form with submissions, and stores the values as HMACs', async () => {
    const f = await form([{ type: 'text', label: 'Member no.' }], { isEncrypted: true, encryptionPassword: PASSWORD });
    const [member] = f.fields as [number];
    const first = await submitted(f.id, [{ id: member, value: 'M-7' }]);

    const missing = await a.put(`/forms/${f.id}/fields/${member}`, { unique: true });
    assert.equal(missing.status, 401, missing.text);
    assert.equal(missing.body.code, 'encryption_password_required');
    const wrong = await a.put(`/forms/${f.id}/fields/${member}`, { unique: true }, withPassword('not the password'));
    assert.equal(wrong.status, 401, wrong.text);
    assert.equal(wrong.body.code, 'encryption_password_invalid');
    assert.equal((await a.get(`/forms/${f.id}/fields/${member}`)).body.unique, false);
    // Other changes need no password.
    assert.equal((await a.put(`/forms/${f.id}/fields/${member}`, { label: 'Member number' })).status, 200);

    const on = await a.put(`/forms/${f.id}/fields/${member}`, { unique: true }, withPassword());
    assert.equal(on.status, 200, on.text);
    const rows = await uniqueRows(member);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.submission_id, first);
    assert.match(rows[0]!.value_norm, /^h1:/, 'no value in the clear');
    const again = await submit(f.id, [{ id: member, value: 'm-7' }]);
    assert.equal(again.status, 400, again.text);
    assert.equal(again.body.code, 'not_unique');

    // An encrypted form without submissions has nothing to open.
    const empty = await form([{ type: 'text', label: 'Code' }], { isEncrypted: true, encryptionPassword: PASSWORD });
    assert.equal((await a.put(`/forms/${empty.id}/fields/${empty.fields[0]}`, { unique: true })).status, 200);
  });

  it('fills the values of a form larger than one page of submissions', async () => {
    const f = await form([{ type: 'number', label: 'Seq' }]);
    const [seq] = f.fields as [number];
    const db = app.server.ctx.db;
    // Rows written straight to the table: creating 2,500 through the API would take the test's time.
    const now = Date.UTC(2026, 0, 1);
    const rows = Array.from({ length: 2500 }, (_, i) => ({
      account_id: a.accountId,
      form_id: f.id,
      created_at: now,
      updated_at: now,
      user_agent: 'test',
      remote_addr: '127.0.0.1',
      data: JSON.stringify({ [seq]: i === 2400 ? 7 : i }),
    }));
    for (let i = 0; i < rows.length; i += 500)
      await db
        .insertInto('submissions')
        .values(rows.slice(i, i + 500))
        .execute();
    const res = await a.put(`/forms/${f.id}/fields/${seq}`, { unique: true });
    assert.equal(res.status, 409, 'the value of the 2,401st row is the 8th one');
    assert.equal(res.body.details.length, 1);
    const [, holder, duplicate] = /submissions (\d+) and (\d+) hold/.exec(res.body.details[0].message)!.map(Number);
    assert.equal(duplicate! - holder!, 2400 - 7);
    assert.deepEqual(await uniqueRows(seq), [], 'nothing of the pages before it stays');
    await db.deleteFrom('submissions').where('id', '=', duplicate!).execute();
    assert.equal((await a.put(`/forms/${f.id}/fields/${seq}`, { unique: true })).status, 200);
    assert.equal((await uniqueRows(seq)).length, 2499);
    assert.equal((await submit(f.id, [{ id: seq, value: 2499 }])).status, 400);
    assert.equal((await submit(f.id, [{ id: seq, value: 2400 }])).status, 200);
  });
});
