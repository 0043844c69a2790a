/** The v2 submission paths, the count and the file download (docs/v2.md). */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import {
  assertDeleted,
  assertShape,
  assertV2Error,
  LIST_SHAPE,
  ok,
  SUBMISSION_SHAPE,
  v2,
  V2_TIME,
} from './support/v2.js';

const PASSWORD = 'correct horse battery';

describe(`v2 submissions (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let b: TestAccount;
  let call: ReturnType<typeof v2>;
  let formId: number;
  const f = { Name: 0, Note: 0, Extras: 0, File: 0 };

  before(async () => {
    app = await startTestApp();
    [a, b] = await Promise.all([app.account('A'), app.account('B')]);
    call = v2(app, a.token);
    const form = ok(
      await a.post('/forms', {
        name: 'Order',
        fields: [
          { type: 'name', label: 'Name' },
          { type: 'text', label: 'Note' },
          {
            type: 'checkbox',
            label: 'Extras',
            options: [
              { label: 'Bag', value: 'bag' },
              { label: 'Card', value: 'card' },
            ],
          },
          { type: 'file', label: 'File' },
        ],
      }),
    );
    formId = form.id;
    for (const field of form.fields) (f as Record<string, number>)[field.label] = field.id;
  });
  after(() => app.close());

  let made: any;
  it('submits form-encoded field_<id> values, subfields in brackets, a checkbox comma-separated', async () => {
    made = ok(
      await call('POST', `/form/${formId}/submission.json`, {
        [`field_${f.Name}`]: { first: 'Ada', last: 'Lovelace' },
        [`field_${f.Note}`]: 'first note',
        [`field_${f.Extras}`]: 'bag,card',
        [`field_${f.File}`]: `note.txt;${Buffer.from('hello').toString('base64')}`,
      }),
      201,
    );
    assertShape(made, SUBMISSION_SHAPE, 'submission');
    assert.equal(made.form, String(formId));
    assert.equal(made.data[f.Name].value.first, 'Ada');
    assert.equal(made.data[f.Note].value, 'first note');
    assert.deepEqual(made.data[f.Extras].value, ['bag', 'card']);
    // Round trip: the same data through v2025.
    const same = ok(await a.get(`/submissions/${made.id}`));
    assert.deepEqual(same.data.find((d: any) => d.field === f.Name).value, { first: 'Ada', last: 'Lovelace' });
  });

  it('submits JSON with subfields as an object and a checkbox as a list; labelled JSON but form-encoded too', async () => {
    const json = ok(
      await call(
        'POST',
        `/form/${formId}/submission`,
        { [`field_${f.Name}`]: { first: 'Grace', last: 'Hopper' }, [`field_${f.Extras}`]: ['card'] },
        'json',
      ),
      201,
    );
    assert.deepEqual(json.data[f.Extras].value, ['card']);
    const labelled = ok(
      await call(
        'POST',
        `/form/${formId}/submission`,
        { [`field_${f.Note}`]: 'labelled', [`field_${f.Extras}`]: ['bag'] },
        'form-as-json',
      ),
      201,
    );
    assert.equal(labelled.data[f.Note].value, 'labelled');
    assertV2Error(await call('POST', `/form/${formId}/submission`, { [`field_${f.Extras}`]: 'nothing-like-it' }), 400);
  });

  it('takes latitude and longitude as numbers or decimal text, empty text as none, and refuses anything else with a 400', async () => {
    // A form of its own: the tests after this one count the submissions of theirs.
    const form = ok(await a.post('/forms', { name: 'Placed', fields: [{ type: 'text', label: 'Note' }] }));
    const path = `/form/${form.id}/submission`;
    const note = { [`field_${form.fields[0].id}`]: 'placed' };
    const text = ok(await call('POST', path, { ...note, latitude: '45.5', longitude: '-73.25' }), 201);
    const json = ok(await call('POST', path, { ...note, latitude: 45.5, longitude: 0 }, 'json'), 201);
    const none = ok(await call('POST', path, { ...note, latitude: '', longitude: ' ' }), 201);
    const stored = async (id: string) => {
      const s = ok(await a.get(`/submissions/${id}`));
      return [s.latitude, s.longitude];
    };
    assert.deepEqual(await stored(text.id), [45.5, -73.25]);
    assert.deepEqual(await stored(json.id), [45.5, 0]);
    assert.deepEqual(await stored(none.id), [null, null]);
    // An object (latitude[toString]=1 once reached Number() and made a 500), a word, out of range, an exponent.
    for (const bad of [{ latitude: { toString: 1 } }, { longitude: 'east' }, { latitude: '91' }, { latitude: '1e1' }]) {
      assertV2Error(await call('POST', path, { ...note, ...bad }), 400);
      assertV2Error(await call('POST', path, { ...note, ...bad }, 'json'), 400);
    }
  });

  it('lists with the submissions wrapper, data keyed by field id, search, sort and times', async () => {
    for (const path of [`/form/${formId}/submission`, `/form/${formId}/submission.json`]) {
      const list = ok(await call('GET', `${path}?per_page=2&page=1&sort=ASC&data=1`));
      assertShape(list, LIST_SHAPE, 'list');
      assert.equal(list.total, 3);
      assert.equal(list.pages, 2);
      assert.equal(list.submissions[0].id, made.id);
      assert.equal(list.submissions[0].data[f.Note].value, 'first note');
      assert.match(list.submissions[0].timestamp, V2_TIME);
    }
    const found = ok(
      await call('GET', `/form/${formId}/submission.json?search_field_0=${f.Note}&search_value_0=labelled`),
    );
    assert.equal(found.total, 1);
    const none = ok(await call('GET', `/form/${formId}/submission.json?min_time=2999-01-01%2000:00:00`));
    assert.equal(none.total, 0);
    const plain = ok(await call('GET', `/form/${formId}/submission.json`));
    assert.equal('data' in plain.submissions[0], false);
    const count = ok(await call('GET', `/form/${formId}/count.json`));
    assert.deepEqual(count, { id: String(formId), count: 3 });
  });

  it("answers a file's value as its v2 download URL, a list of them for several files", async () => {
    const url = (id: string, field: number, index: number) =>
      `${app.config.publicUrl}/api/v2/download/${id}/${field}/${index}`;
    assert.equal(made.data[f.File].value, url(made.id, f.File, 0));
    assert.match(made.data[f.File].flat_value, /note\.txt/);
    const read = ok(await call('GET', `/submission/${made.id}`));
    assert.equal(read.data[f.File].value, url(made.id, f.File, 0));
    const listed = ok(await call('GET', `/form/${formId}/submission?data=1&sort=ASC&per_page=1`)).submissions[0];
    assert.equal(listed.id, made.id);
    assert.equal(listed.data[f.File].value, url(made.id, f.File, 0));
    const file = await app.request('GET', new URL(made.data[f.File].value).pathname, { token: a.token });
    assert.equal(file.status, 200);
    assert.equal(file.text, 'hello');

    // A form of its own, whose field takes several files: the tests after this one count this form's submissions.
    const form = ok(
      await a.post('/forms', {
        name: 'Files',
        fields: [{ type: 'file', label: 'Scans', attributes: { maxFiles: 2 } }],
      }),
    );
    const field = form.fields[0].id;
    const two = ok(
      await call(
        'POST',
        `/form/${form.id}/submission`,
        {
          [`field_${field}`]: [
            'a.txt;' + Buffer.from('first').toString('base64'),
            'b.txt;' + Buffer.from('second').toString('base64'),
          ],
        },
        'json',
      ),
      201,
    );
    assert.deepEqual(two.data[field].value, [url(two.id, field, 0), url(two.id, field, 1)]);
    const second = await app.request('GET', new URL(two.data[field].value[1]).pathname, { token: a.token });
    assert.equal(second.text, 'second');
  });

  it('reads, edits and deletes a submission; edits through v2025 show in v2', async () => {
    for (const path of [`/submission/${made.id}`, `/submission/${made.id}.json`])
      assertShape(ok(await call('GET', path)), SUBMISSION_SHAPE, path);
    const edited = ok(await call('PUT', `/submission/${made.id}.json`, { [`field_${f.Note}`]: 'edited in v2' }));
    assert.equal(edited.data[f.Note].value, 'edited in v2');
    ok(await a.put(`/submissions/${made.id}`, { fields: [{ id: f.Note, value: 'edited in v2025' }] }));
    assert.equal(ok(await call('GET', `/submission/${made.id}`)).data[f.Note].value, 'edited in v2025');
    const file = await app.request('GET', `/api/v2/download/${made.id}/${f.File}`, { token: a.token });
    assert.equal(file.status, 200);
    assert.equal(file.text, 'hello');
    assertV2Error(await call('GET', `/download/${made.id}/${f.File}/1`), 404);
    const theirs = v2(app, b.token);
    assertV2Error(await theirs('GET', `/submission/${made.id}`), 404);
    assertV2Error(await theirs('GET', `/download/${made.id}/${f.File}`), 404);
    assertV2Error(await theirs('GET', `/form/${formId}/submission`), 404);
    assertDeleted(await call('DELETE', `/submission/${made.id}.json`), made.id);
    assertV2Error(await call('GET', `/submission/${made.id}`), 404);
  });

  it('reads an encrypted form with encryption_password as a parameter or the header', async () => {
    const form = ok(
      await call('POST', '/form', { name: 'Sealed', encrypted: '1', encryption_password: PASSWORD }),
      201,
    );
    assert.equal(form.encrypted, true);
    const field = ok(await call('POST', `/form/${form.id}/field`, { field_type: 'text', label: 'Secret' }), 201);
    const s = ok(await call('POST', `/form/${form.id}/submission`, { [`field_${field.id}`]: 'hidden' }), 201);
    assertV2Error(await call('GET', `/submission/${s.id}`), 401);
    assert.equal(
      ok(await call('GET', `/submission/${s.id}.json?encryption_password=${encodeURIComponent(PASSWORD)}`)).data[
        field.id
      ].value,
      'hidden',
    );
    assert.equal(
      ok(await call('GET', `/submission/${s.id}`, undefined, 'form', { 'x-fs-encryption-password': PASSWORD })).data[
        field.id
      ].value,
      'hidden',
    );
    assertV2Error(await call('GET', `/submission/${s.id}?encryption_password=wrong-password`), 401);
  });

  it('reads an empty encryption_password as none, as an empty header is: a plain form answers, an encrypted one asks', async () => {
    const plain = ok(await a.post('/forms', { name: 'Plain', fields: [{ type: 'text', label: 'Note' }] }));
    const note = plain.fields[0].id;
    const s = ok(await call('POST', `/form/${plain.id}/submission`, { [`field_${note}`]: 'open' }), 201);
    assert.equal(ok(await call('GET', `/submission/${s.id}?encryption_password=`)).data[note].value, 'open');
    assert.equal(ok(await call('GET', `/form/${plain.id}/submission?encryption_password=&data=1`)).total, 1);
    const edited = ok(
      await call('PUT', `/submission/${s.id}`, { [`field_${note}`]: 'edited', encryption_password: '' }),
    );
    assert.equal(edited.data[note].value, 'edited');

    const sealed = ok(
      await call('POST', '/form', { name: 'Sealed too', encrypted: '1', encryption_password: PASSWORD }),
      201,
    );
    const field = ok(await call('POST', `/form/${sealed.id}/field`, { field_type: 'text', label: 'Secret' }), 201);
    const hidden = ok(await call('POST', `/form/${sealed.id}/submission`, { [`field_${field.id}`]: 'x' }), 201);
    const refused = await call('GET', `/submission/${hidden.id}?encryption_password=`);
    assertV2Error(refused, 401);
    assert.equal(refused.body.code, 'encryption_password_required');
  });

  it('takes a file named with a semicolon as name.ext;<base64>, as its {filename, content} form takes it', async () => {
    const form = ok(await a.post('/forms', { name: 'Semicolons', fields: [{ type: 'file', label: 'Report' }] }));
    const field = form.fields[0].id;
    const content = Buffer.from('quarterly').toString('base64');
    for (const style of ['form', 'json'] as const) {
      const s = ok(
        await call('POST', `/form/${form.id}/submission`, { [`field_${field}`]: `report;v2.txt;${content}` }, style),
        201,
      );
      assert.equal(s.data[field].flat_value, 'report;v2.txt');
      const file = await app.request('GET', `/api/v2/download/${s.id}/${field}`, { token: a.token });
      assert.equal(file.status, 200, file.text);
      assert.equal(file.text, 'quarterly');
    }
  });
});
