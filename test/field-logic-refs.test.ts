import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

const show = (checks: unknown[], conditional = 'all') => ({ action: 'show', conditional, checks });

/**
 * Logic checks point at other fields of the form. A change of the field checked that a check
 * no longer fits removes that check, as deleting the field does; and a field's stored logic is
 * checked only when a request sends it, so a check that went stale another way (the options of
 * a smart list replaced) refuses no edit of anything else.
 */
describe(`logic checks on a changed field (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
  });
  after(() => app.close());

  async function form(fields: unknown[]): Promise<{ id: number; ids: number[] }> {
    const res = await a.post('/forms', { name: 'Logic', fields });
    assert.equal(res.status, 200, res.text);
    return { id: res.body.id, ids: res.body.fields.map((f: { id: number }) => f.id) };
  }
  async function put(formId: number, fieldId: number, body: unknown) {
    const res = await a.put(`/forms/${formId}/fields/${fieldId}`, body);
    assert.equal(res.status, 200, `${JSON.stringify(body)}: ${res.text}`);
    return res.body;
  }
  const logicOf = async (formId: number, fieldId: number) =>
    (await a.get(`/forms/${formId}/fields/${fieldId}`)).body.logic;

  it('removes the checks that new options no longer offer, and keeps those that still hold', async () => {
    const options = [
      { label: 'X', value: 'x' },
      { label: 'Y', value: 'y' },
    ];
    const f = await form([
      { type: 'radio', label: 'Q', options },
      { type: 'text', label: 'Dep' },
      { type: 'text', label: 'Other' },
      { type: 'text', label: 'Both' },
      { type: 'text', label: 'Still' },
    ]);
    const [q, dep, other, both, still] = f.ids as [number, number, number, number, number];
    await put(f.id, dep, { logic: show([{ field: q, condition: 'equals', option: 'y' }]) });
    const bothLogic = show(
      [
        { field: q, condition: 'notequals', option: 'y' },
        { field: other, condition: 'notempty' },
      ],
      'any',
    );
    await put(f.id, both, { logic: bothLogic });
    const stillLogic = show([
      { field: q, condition: 'equals', option: 'x' },
      { field: q, condition: 'contains', option: 'zz' },
      { field: q, condition: 'notempty' },
    ]);
    await put(f.id, still, { logic: stillLogic });

    await put(f.id, q, {
      options: [
        { label: 'X', value: 'x' },
        { label: 'S', value: 's' },
      ],
    });
    assert.equal(await logicOf(f.id, dep), null, 'logic left with no checks is removed');
    assert.deepEqual(await logicOf(f.id, both), { ...bothLogic, checks: [bothLogic.checks[1]] });
    assert.deepEqual(await logicOf(f.id, still), stillLogic, 'checks that still hold stay');

    // The dependent field is edited as any other: nothing stale is left to refuse it.
    const renamed = await put(f.id, dep, { label: 'Dep2' });
    assert.equal(renamed.label, 'Dep2');

    // A submission shows the field whose logic went: it is required again.
    await put(f.id, dep, { required: true });
    const missing = await a.post(`/forms/${f.id}/submissions`, { fields: [{ id: q, value: 'x' }] });
    assert.equal(missing.status, 400, missing.text);
    assert.equal(missing.body.code, 'required_field_missing');
  });

  it('removes every check on a field whose new type holds no value', async () => {
    const f = await form([
      { type: 'radio', label: 'Q', options: [{ label: 'Y', value: 'y' }] },
      { type: 'number', label: 'N' },
      { type: 'text', label: 'Dep' },
      { type: 'text', label: 'Mixed' },
    ]);
    const [q, n, dep, mixed] = f.ids as [number, number, number, number];
    await put(f.id, dep, { logic: show([{ field: q, condition: 'notempty' }]) });
    const mixedLogic = show([
      { field: q, condition: 'equals', option: 'y' },
      { field: n, condition: 'greaterthan', option: '3' },
    ]);
    await put(f.id, mixed, { logic: mixedLogic });

    await put(f.id, q, { type: 'section' });
    assert.equal(await logicOf(f.id, dep), null);
    assert.deepEqual(await logicOf(f.id, mixed), { ...mixedLogic, checks: [mixedLogic.checks[1]] });
    assert.equal((await put(f.id, dep, { label: 'Dep2' })).label, 'Dep2');

    // A type that still takes input keeps the checks that fit it.
    await put(f.id, mixed, { logic: show([{ field: n, condition: 'lessthan', option: '10' }]) });
    await put(f.id, n, { type: 'text' });
    assert.deepEqual((await logicOf(f.id, mixed)).checks, [{ field: n, condition: 'lessthan', option: '10' }]);
  });

  it('checks stored logic only when it is sent: a check gone stale with a smart list refuses no other edit', async () => {
    const list = await a.post('/smartlists', { name: 'Answers' });
    assert.equal(list.status, 201, list.text);
    const bulk = (values: string[]) =>
      a.post(`/smartlists/${list.body.id}/bulkoptions`, { options: values.map((v) => ({ label: v, value: v })) });
    assert.equal((await bulk(['y', 'n'])).status, 200);
    const f = await form([
      { type: 'select', label: 'Q', smartList: list.body.id },
      { type: 'text', label: 'Dep' },
    ]);
    const [q, dep] = f.ids as [number, number];
    const stale = show([{ field: q, condition: 'equals', option: 'y' }]);
    await put(f.id, dep, { logic: stale });
    // The list's options are replaced: nothing passes through the field's update.
    assert.equal((await a.delete(`/smartlists/${list.body.id}/alloptions`)).status, 200);
    assert.equal((await bulk(['a', 'b'])).status, 200);

    const renamed = await a.put(`/forms/${f.id}/fields/${dep}`, { label: 'Dep2' });
    assert.equal(renamed.status, 200, `an edit of the label was refused for logic it did not send: ${renamed.text}`);
    assert.deepEqual(renamed.body.logic, stale, 'the stored logic stays as it was');

    const resent = await a.put(`/forms/${f.id}/fields/${dep}`, { logic: stale });
    assert.equal(resent.status, 400, resent.text);
    assert.equal(resent.body.code, 'invalid_field');
    assert.deepEqual(
      resent.body.details.map((d: { property: string }) => d.property),
      ['body.logic.checks[0].option'],
    );
  });

  it('checks a stored default value only when it or the options are sent: one gone stale with a smart list refuses no relabel', async () => {
    const list = await a.post('/smartlists', { name: 'Defaults' });
    assert.equal(list.status, 201, list.text);
    const bulk = (values: string[]) =>
      a.post(`/smartlists/${list.body.id}/bulkoptions`, { options: values.map((v) => ({ label: v, value: v })) });
    assert.equal((await bulk(['y', 'n'])).status, 200);
    const f = await form([{ type: 'select', label: 'Q', smartList: list.body.id, defaultValue: 'y' }]);
    const [q] = f.ids as [number];
    assert.equal((await a.delete(`/smartlists/${list.body.id}/alloptions`)).status, 200);
    assert.equal((await bulk(['a', 'b'])).status, 200);

    const renamed = await a.put(`/forms/${f.id}/fields/${q}`, { label: 'Q2' });
    assert.equal(renamed.status, 200, `a relabel was refused for a default value it did not send: ${renamed.text}`);
    assert.equal(renamed.body.defaultValue, 'y', 'the stored default stays as it was');

    for (const body of [{ defaultValue: 'y' }, { smartList: list.body.id }]) {
      const res = await a.put(`/forms/${f.id}/fields/${q}`, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.deepEqual(
        res.body.details.map((d: { property: string }) => d.property),
        ['body.defaultValue'],
      );
    }
    assert.equal((await a.put(`/forms/${f.id}/fields/${q}`, { defaultValue: 'a' })).status, 200);
  });

  /*
   * A logic check sent while the field it checks is deleted: either the check is refused (the
   * field is gone) or the delete removes it. On PostgreSQL the two run on connections of their
   * own, and a delete that read the form's logic before the check was written once left it
   * pointing at the deleted field: the field it hid was never shown again, and copies kept it.
   */
  it('never leaves a check on a field deleted as the check is written', async () => {
    for (let round = 0; round < 25; round++) {
      const made = await a.post('/forms', {
        name: `Race ${round}`,
        fields: [
          { type: 'text', label: 'Dep' },
          { type: 'text', label: 'Gone' },
        ],
      });
      assert.equal(made.status, 200, made.text);
      const [dep, gone] = made.body.fields.map((f: { id: number }) => f.id) as [number, number];
      const [put, del] = await Promise.all([
        a.put(`/forms/${made.body.id}/fields/${dep}`, { logic: show([{ field: gone, condition: 'notempty' }]) }),
        a.delete(`/forms/${made.body.id}/fields/${gone}`),
      ]);
      assert.equal(del.status, 200, `round ${round}: ${del.text}`);
      assert.ok(put.status === 200 || put.status === 400, `round ${round}: ${put.status} ${put.text}`);
      const logic = (await a.get(`/forms/${made.body.id}/fields/${dep}`)).body.logic;
      assert.equal(logic, null, `round ${round}: a check on deleted field ${gone} stayed: ${JSON.stringify(logic)}`);
    }
  });
});
