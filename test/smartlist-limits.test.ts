/**
 * The bound on the options a form shows (MAX_OPTIONS_PER_FORM, docs/smartlists.md): every
 * write that could make a live form show more is refused with 400 too_many_options and
 * writes nothing; a form right at the bound works, and its hosted page renders.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPersonalToken } from '../src/modules/accounts/service.js';
import { MAX_BULK_OPTIONS, MAX_OPTIONS_PER_FORM } from '../src/modules/smartlists/schemas.js';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';

function expectTooMany(res: Reply, ...named: string[]): void {
  assert.equal(res.status, 400, res.text.slice(0, 500));
  assert.equal(res.body.status, 'error');
  assert.equal(res.body.code, 'too_many_options', res.text.slice(0, 500));
  for (const text of named) assert.ok(res.body.error.includes(text), `"${text}" in: ${res.body.error}`);
  assert.equal(res.body.details?.length, 1, res.text.slice(0, 500));
}

function ok<T = any>(res: Reply<T>, status = 200): T {
  assert.equal(res.status, status, res.text.slice(0, 500));
  return res.body;
}

const option = (i: number) => ({ label: `Option ${i}`, value: `v${i}` });
const own = (n: number, prefix = 'o') =>
  Array.from({ length: n }, (_, i) => ({ label: `${prefix} ${i}`, value: `${prefix}${i}` }));

describe(`the options a form shows (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  /** L: the list that the forms below use; its options are v0, v1 … in order. */
  let list: number;
  let listSize = 0;
  /** F: two fields on L and a select of two options of its own. */
  let form: any;
  let ownSelect: number;

  before(async () => {
    app = await startTestApp();
    a = await app.account();
    list = ok(await a.post('/smartlists', { name: 'Big' }), 201).id;
    await grow(20_000);
  });
  after(() => app.close());

  /** Adds count options to L, in bulk calls of at most 10,000. */
  async function grow(count: number): Promise<void> {
    for (let done = 0; done < count; done += MAX_BULK_OPTIONS) {
      const n = Math.min(MAX_BULK_OPTIONS, count - done);
      const from = listSize;
      ok(
        await a.post(`/smartlists/${list}/bulkoptions`, {
          options: Array.from({ length: n }, (_, i) => option(from + i)),
        }),
      );
      listSize += n;
    }
  }

  async function optionsCount(): Promise<number> {
    return ok(await a.get(`/smartlists/${list}`)).optionsCount;
  }

  /** The form's fields as ids, types, lists and option counts: what a refused write must leave as it was. */
  async function fieldsOf(formId: number): Promise<string[]> {
    return ok(await a.get(`/forms/${formId}/fields`)).fields.map(
      (f: any) => `${f.id}:${f.type}:${f.smartList}:${f.options.length}`,
    );
  }

  async function formCount(account: TestAccount['get'] = a.get): Promise<number> {
    return ok(await account('/forms?pageSize=1')).total;
  }

  it('creates a form of 40,002 options, and refuses a form that would show more than 50,000', async () => {
    const before = await formCount();
    const refused = await a.post('/forms', {
      name: 'Three times',
      fields: [1, 2, 3].map((i) => ({ type: 'select', label: `S${i}`, smartList: list })),
    });
    expectTooMany(refused, 'the new form "Three times" would show 60000 options', `${MAX_OPTIONS_PER_FORM}`);
    assert.equal(refused.body.details[0].property, 'body.fields');
    // Own options count too: two fields on the list, and 11 of 1,000 options each (within a field's own bound).
    expectTooMany(
      await a.post('/forms', {
        name: 'Own',
        fields: [
          { type: 'select', label: 'L1', smartList: list },
          { type: 'select', label: 'L2', smartList: list },
          ...Array.from({ length: 11 }, (_, i) => ({ type: 'radio', label: `R${i}`, options: own(1000) })),
        ],
      }),
      'would show 51000 options',
    );
    assert.equal(await formCount(), before, 'no form written');

    form = ok(
      await a.post('/forms', {
        name: 'Twice',
        fields: [
          { type: 'select', label: 'First', smartList: list },
          { type: 'radio', label: 'Second', smartList: list },
          { type: 'select', label: 'Own', options: own(2) },
          { type: 'text', label: 'Text' },
        ],
      }),
    );
    ownSelect = form.fields.find((f: any) => f.label === 'Own').id;
  });

  it('refuses a field that would make the form show too many options, and writes nothing', async () => {
    const fields = await fieldsOf(form.id);
    const onList = await a.post(`/forms/${form.id}/fields`, { type: 'checkbox', label: 'Third', smartList: list });
    expectTooMany(onList, `form ${form.id} "Twice" would show 60002 options`);
    assert.equal(onList.body.details[0].property, 'body.smartList');

    // A list used by a form of another field counts once per field: the own select attached to it.
    const attach = await a.put(`/forms/${form.id}/fields/${ownSelect}`, { smartList: list });
    expectTooMany(attach, 'would show 60000 options');
    const text = form.fields.find((f: any) => f.type === 'text').id;
    expectTooMany(
      await a.put(`/forms/${form.id}/fields/${text}`, { type: 'select', smartList: list }),
      'would show 60002 options',
    );
    assert.deepEqual(await fieldsOf(form.id), fields, 'the fields are as they were');

    // Within the bound, own options grow as before.
    ok(await a.put(`/forms/${form.id}/fields/${ownSelect}`, { options: own(1000) }));
    ok(await a.put(`/forms/${form.id}/fields/${ownSelect}`, { options: own(2) }));
  });

  it('refuses options that a form using the list twice cannot show, naming it and its fields', async () => {
    // F shows 2 × 20,000 + 2; 5,000 more options would show 2 × 25,000 + 2 = 50,002.
    const refused = await a.post(`/smartlists/${list}/bulkoptions`, {
      options: Array.from({ length: 5000 }, (_, i) => option(listSize + i)),
    });
    const [first, second] = form.fields.filter((f: any) => f.smartList === list);
    expectTooMany(
      refused,
      `form ${form.id} "Twice" would show 50002 options`,
      `${first.id} "First"`,
      `${second.id} "Second"`,
    );
    assert.equal(refused.body.details[0].property, 'body.options');
    assert.equal(await optionsCount(), 20_000, 'no option written');

    // 4,999 more make it 50,000 exactly: allowed. Then one more is not.
    await grow(4999);
    assert.equal(await optionsCount(), 24_999);
    expectTooMany(await a.post(`/smartlists/${list}/options`, option(listSize)), 'would show 50002 options');
    assert.equal(await optionsCount(), 24_999);
  });

  it('shows a form right at the bound: its record and its hosted page', async () => {
    const fields = ok(await a.get(`/forms/${form.id}/fields`)).fields;
    const shown = fields.reduce((n: number, f: any) => n + f.options.length, 0);
    assert.equal(shown, MAX_OPTIONS_PER_FORM);
    const page = await app.request('GET', `/f/${form.viewKey}`);
    assert.equal(page.status, 200);
    assert.equal(
      page.text.split('<option value="v24998">Option 24998</option>').length,
      2,
      'the select shows the last option',
    );
    assert.ok(page.text.includes(`name="f${fields.find((f: any) => f.label === 'Second').id}" value="v24998"`));
    // Own options at the bound too: one more of its own is refused.
    expectTooMany(
      await a.post(`/forms/${form.id}/fields`, { type: 'select', label: 'One more', options: own(1) }),
      'would show 50001 options',
    );
    assert.equal((await fieldsOf(form.id)).length, 4);
  });

  it('lets four fields race for the room of one: one is written', async () => {
    // G shows L once (24,999): room for one more field on L, not two.
    const g = ok(await a.post('/forms', { name: 'Race', fields: [{ type: 'select', label: 'L', smartList: list }] }));
    const answers = await Promise.all(
      [1, 2, 3, 4].map((i) => a.post(`/forms/${g.id}/fields`, { type: 'radio', label: `Race ${i}`, smartList: list })),
    );
    assert.deepEqual(
      answers.map((r) => r.status).sort(),
      [200, 400, 400, 400],
      JSON.stringify(answers.map((r) => [r.status, r.body.code])),
    );
    assert.equal((await fieldsOf(g.id)).length, 2);
    ok(await a.delete(`/forms/${g.id}`));
  });

  it('counts no deleted form, and refuses to restore one that grew past the bound', async () => {
    ok(await a.delete(`/forms/${form.id}`));
    const added = ok(await a.post(`/smartlists/${list}/options`, option(listSize)), 201);
    listSize++;
    const restore = await a.post(`/forms/${form.id}/restore`);
    expectTooMany(restore, `form ${form.id} "Twice" would show 50002 options`);
    assert.equal((await a.get(`/forms/${form.id}`)).status, 404, 'still deleted');
    ok(await a.delete(`/smartlists/${list}/options/${added.id}`));
    listSize--;
    ok(await a.post(`/forms/${form.id}/restore`));
  });

  it('refuses to copy a form over the bound (one made before it), here or into a subaccount', async () => {
    // A form over the bound can only predate it: made so here by writing an option past the checks.
    const now = Date.now();
    await app.server.ctx.db
      .insertInto('smart_list_options')
      .values({
        account_id: a.accountId,
        list_id: list,
        label: 'Written before the bound',
        value: 'legacy',
        display_order: listSize,
        image_key: null,
        created_at: now,
        updated_at: now,
      })
      .execute();
    const before = await formCount();
    expectTooMany(
      await a.post(`/forms/${form.id}/copy`),
      `Form ${form.id} "Twice" cannot be copied`,
      'the new form "Twice (copy)" would show 50002 options',
    );
    assert.equal(await formCount(), before);

    const sub = ok(
      await a.post('/subaccount', {
        name: 'Branch',
        email: `branch-${randomBytes(5).toString('hex')}@example.com`,
        password: 'long enough password',
      }),
      201,
    );
    const token = (await createPersonalToken(app.server.ctx, sub.owner.id)).token;
    const subGet: TestAccount['get'] = (path, options) =>
      app.request('GET', `/api/v2025${path}`, { token, ...options });
    const subForms = await formCount(subGet);
    expectTooMany(await a.post(`/subaccount/${sub.id}/form/${form.id}/copy`), 'would show 50002 options');
    assert.equal(await formCount(subGet), subForms);

    // Back at the bound, both copy: the copy here uses the list, the subaccount's keeps its options.
    const legacy = ok(await a.get(`/smartlists/${list}/options?query=${encodeURIComponent('before the bound')}`))
      .options[0];
    ok(await a.delete(`/smartlists/${list}/options/${legacy.id}`));
    const copy = ok(await a.post(`/forms/${form.id}/copy`));
    assert.equal(copy.fields.filter((f: any) => f.smartList === list).length, 2);
    ok(await a.post(`/subaccount/${sub.id}/form/${form.id}/copy`), 201);
    assert.equal(await formCount(subGet), subForms + 1);
    // Two live forms now show L twice: either refuses more.
    expectTooMany(await a.post(`/smartlists/${list}/options`, option(listSize)), `form ${copy.id} "Twice (copy)"`);
  });
});
