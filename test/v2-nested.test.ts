/**
 * v2 parameters nested below the top level (docs/v2.md, "Requests"): bracket notation read by
 * the v2025 schema at every level, on the database the suite runs on. The bodies are written
 * out as a v2 client sends them, form-encoded.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dialectName, startTestApp, type Reply, type TestAccount, type TestApp } from './support/helpers.js';
import { assertDeleted, assertV2Error, ok, v2 } from './support/v2.js';

describe(`v2 nested parameters (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let call: ReturnType<typeof v2>;
  let formId: string;
  let choice: any;

  /** A form-encoded v2 request, its body given as the text a client sends (brackets unescaped, for reading). */
  const send = (method: string, path: string, text: string, contentType = 'application/x-www-form-urlencoded') =>
    app.request(method, `/api/v2${path}`, {
      token: a.token,
      raw: text
        .split('&')
        .map((pair) => pair.split('=').map(encodeURIComponent).join('='))
        .join('&'),
      headers: { 'content-type': contentType },
    });

  /** A 400 in v2's error body, whose details name the v2025 property. */
  const refused = (res: Reply, property: RegExp) => {
    assertV2Error(res, 400);
    assert.ok(
      (res.body.details ?? []).some((d: any) => property.test(d.property)),
      `${property} not in ${JSON.stringify(res.body)}`,
    );
  };

  before(async () => {
    app = await startTestApp();
    a = await app.account('A');
    call = v2(app, a.token);
    formId = ok(await call('POST', '/form', { name: 'Nested' }), 201).id;
    choice = ok(
      await send('POST', `/form/${formId}/field.json`, 'field_type=radio&label=Call me?&options=Yes,No'),
      201,
    );
  });
  after(() => app.close());

  it('creates a field with logic from bracket parameters; v2 and v2025 read the same logic', async () => {
    const field = ok(
      await send(
        'POST',
        `/form/${formId}/field`,
        'field_type=text&label=Phone&required=0' +
          '&logic[action]=show&logic[conditional]=all' +
          `&logic[checks][0][field]=${choice.id}&logic[checks][0][condition]=equals&logic[checks][0][option]=Yes`,
      ),
      201,
    );
    const expected = {
      action: 'show',
      conditional: 'all',
      checks: [{ field: choice.id, condition: 'equals', option: 'Yes' }],
    };
    assert.deepEqual(field.logic, expected);
    assert.deepEqual(ok(await call('GET', `/field/${field.id}.json`)).logic, expected);
    const listed = ok(await call('GET', `/form/${formId}/field`)).fields.find((f: any) => f.id === field.id);
    assert.deepEqual(listed.logic, expected);
    // v2025: the id is a number, the checks a list.
    assert.deepEqual(ok(await a.get(`/forms/${formId}/fields/${field.id}`)).logic, {
      action: 'show',
      conditional: 'all',
      checks: [{ field: Number(choice.id), condition: 'equals', option: 'Yes' }],
    });
  });

  it('changes logic with PUT: checks in index order, from the body or the query string; empty logic removes it', async () => {
    const other = ok(await send('POST', `/form/${formId}/field`, 'field_type=email&label=Email'), 201);
    const field = ok(await send('POST', `/form/${formId}/field`, 'field_type=text&label=Note'), 201);
    assert.equal(field.logic, null);
    // Index 1 before index 0 in the body; unknown nested names (colour) ignored, as at the top level.
    const changed = ok(
      await send(
        'PUT',
        `/field/${field.id}.json`,
        'logic[action]=hide&logic[conditional]=any&logic[colour]=red' +
          `&logic[checks][1][field]=${other.id}&logic[checks][1][condition]=notempty` +
          `&logic[checks][0][field]=${choice.id}&logic[checks][0][condition]=notequals&logic[checks][0][option]=No`,
      ),
    );
    const expected = {
      action: 'hide',
      conditional: 'any',
      checks: [
        { field: choice.id, condition: 'notequals', option: 'No' },
        { field: other.id, condition: 'notempty', option: '' },
      ],
    };
    assert.deepEqual(changed.logic, expected);
    const v2025 = ok(await a.get(`/forms/${formId}/fields/${field.id}`));
    assert.deepEqual(
      v2025.logic.checks.map((c: any) => c.field),
      [Number(choice.id), Number(other.id)],
    );
    assert.equal(v2025.label, 'Note');

    // Four levels in the query string, which the app's own parser cuts at three.
    const query =
      `logic[action]=show&logic[conditional]=all&logic[checks][0][field]=${other.id}` +
      '&logic[checks][0][condition]=contains&logic[checks][0][option]=@example.com';
    const viaQuery = ok(
      await send(
        'PUT',
        `/field/${field.id}?${query.replace(/@/g, '%40')}`,
        'label=Notes',
        'application/x-www-form-urlencoded',
      ),
    );
    assert.deepEqual(viaQuery.logic, {
      action: 'show',
      conditional: 'all',
      checks: [{ field: other.id, condition: 'contains', option: '@example.com' }],
    });
    assert.equal(viaQuery.label, 'Notes');

    // JSON bodies keep working: a list, or an object keyed by index, ids as numbers or text.
    const json = ok(
      await call(
        'PUT',
        `/field/${field.id}`,
        {
          logic: { action: 'show', conditional: 'any', checks: { 0: { field: String(other.id), condition: 'empty' } } },
        },
        'json',
      ),
    );
    assert.deepEqual(json.logic.checks, [{ field: other.id, condition: 'empty', option: '' }]);
    const jsonList = ok(
      await call(
        'PUT',
        `/field/${field.id}`,
        { logic: { action: 'hide', conditional: 'all', checks: [{ field: Number(other.id), condition: 'notempty' }] } },
        'json',
      ),
    );
    assert.equal(jsonList.logic.action, 'hide');

    assert.equal(ok(await send('PUT', `/field/${field.id}`, 'logic=')).logic, null);
    assert.equal(ok(await a.get(`/forms/${formId}/fields/${field.id}`)).logic, null);
  });

  it('reads options, attributes and defaults of fields by their type, at every level', async () => {
    const select = ok(
      await send(
        'POST',
        `/form/${formId}/field`,
        'field_type=select&label=Size' +
          '&options[0][label]=Small&options[0][value]=s&options[1][label]=Large&options[1][image]=x' +
          '&attributes[placeholder]=Pick one&default=s',
      ),
      201,
    );
    assert.deepEqual(select.options, [
      { label: 'Small', value: 's' },
      { label: 'Large', value: 'Large' },
    ]);
    assert.deepEqual(select.attributes, { placeholder: 'Pick one' });
    assert.equal(select.default, 's');

    // snake_case attribute names, numbers and booleans as text, lists as x[n] and x[]; unknown ones ignored.
    const text = ok(
      await send(
        'POST',
        `/form/${formId}/field`,
        'field_type=text&label=Code&attributes[min_length]=2&attributes[max_length]=8&attributes[shade]=blue',
      ),
      201,
    );
    assert.deepEqual(ok(await a.get(`/forms/${formId}/fields/${text.id}`)).attributes, { minLength: 2, maxLength: 8 });
    const file = ok(
      await send(
        'POST',
        `/form/${formId}/field`,
        'field_type=file&label=Upload&attributes[max_files]=3&attributes[allowed_types][]=pdf&attributes[allowed_types][]=png',
      ),
      201,
    );
    const fileAttributes = ok(await a.get(`/forms/${formId}/fields/${file.id}`)).attributes;
    assert.equal(fileAttributes.maxFiles, 3);
    assert.deepEqual(fileAttributes.allowedTypes, ['pdf', 'png']);
    // A PUT without a type reads attributes and the default as the field's current type has them.
    const number = ok(await send('POST', `/form/${formId}/field`, 'field_type=number&label=Age&default=18'), 201);
    assert.equal(number.default, 18);
    assert.equal(ok(await send('PUT', `/field/${number.id}`, 'default=0')).default, 0);
    assert.equal(ok(await send('PUT', `/field/${number.id}`, 'default=2.5')).default, 2.5);
    ok(await send('PUT', `/field/${number.id}`, 'attributes[min]=0.5&attributes[max]=120&attributes[decimals]=1'));
    assert.deepEqual(ok(await a.get(`/forms/${formId}/fields/${number.id}`)).attributes, {
      min: 0.5,
      max: 120,
      decimals: 1,
    });
    const name = ok(
      await send(
        'POST',
        `/form/${formId}/field`,
        'field_type=name&label=Name&attributes[show_middle]=1&default[first]=Ada',
      ),
      201,
    );
    assert.deepEqual(name.default, { first: 'Ada' });
    assert.equal(ok(await a.get(`/forms/${formId}/fields/${name.id}`)).attributes.showMiddle, true);
  });

  it('answers attributes in snake_case, as they are written, so that what is read can be sent back', async () => {
    const text = ok(
      await send(
        'POST',
        `/form/${formId}/field`,
        'field_type=text&label=Code&attributes[min_length]=2&attributes[max_length]=8',
      ),
      201,
    );
    assert.deepEqual(text.attributes, { min_length: 2, max_length: 8 });
    const file = ok(
      await send(
        'POST',
        `/form/${formId}/field`,
        'field_type=file&label=Scan&attributes[max_files]=3&attributes[allowed_types][]=pdf&attributes[allowed_types][]=png',
      ),
      201,
    );
    const attributes = ok(await call('GET', `/field/${file.id}.json`)).attributes;
    assert.equal(attributes.max_files, 3);
    assert.deepEqual(attributes.allowed_types, ['pdf', 'png']);
    assert.deepEqual(
      Object.keys(attributes).filter((k) => /[A-Z]/.test(k)),
      [],
    );
    const inForm = ok(await call('GET', `/form/${formId}`)).fields.find((f: any) => f.id === file.id);
    assert.deepEqual(inForm.attributes, attributes);
    // Sent back as read, as JSON and as bracket parameters: the field is as it was.
    const before = ok(await a.get(`/forms/${formId}/fields/${file.id}`)).attributes;
    assert.deepEqual(ok(await call('PUT', `/field/${file.id}`, { attributes }, 'json')).attributes, attributes);
    assert.deepEqual(ok(await call('PUT', `/field/${file.id}`, { attributes })).attributes, attributes);
    assert.deepEqual(ok(await a.get(`/forms/${formId}/fields/${file.id}`)).attributes, before);
  });

  it('creates a form with its fields from fields[n][…]', async () => {
    const form = ok(
      await send(
        'POST',
        '/form',
        'name=With fields&fields[0][field_type]=select&fields[0][label]=Size' +
          '&fields[0][options][0][label]=S&fields[0][options][1][label]=M' +
          '&fields[1][field_type]=text&fields[1][label]=Note&fields[1][required]=1&fields[1][colspan]=6',
      ),
      201,
    );
    assert.deepEqual(
      form.fields.map((f: any) => [f.type, f.label, f.required, f.colspan]),
      [
        ['select', 'Size', '0', '12'],
        ['text', 'Note', '1', '6'],
      ],
    );
    assert.deepEqual(form.fields[0].options, [
      { label: 'S', value: 'S' },
      { label: 'M', value: 'M' },
    ]);
  });

  it('adds smart-list options from options[n][label] and options[n][value], in index order', async () => {
    const list = ok(await send('POST', '/smartlist', 'name=Colours&use_images=0'), 201);
    assert.equal(list.use_images, false);
    const added = ok(
      await send(
        'POST',
        `/smartlist/${list.id}/bulkoptions`,
        'options[1][label]=Green&options[0][label]=Blue&options[0][value]=blue&options[0][image]=x&options[2][label]=Red',
      ),
    );
    assert.equal(added.added, 3);
    const v2Options = ok(await call('GET', `/smartlist/${list.id}/option.json`)).options;
    assert.deepEqual(
      v2Options.map((o: any) => [o.label, o.value]),
      [
        ['Blue', 'blue'],
        ['Green', 'Green'],
        ['Red', 'Red'],
      ],
    );
    const v2025 = ok(await a.get(`/smartlists/${list.id}/options`));
    assert.deepEqual(
      v2025.options.map((o: any) => o.value),
      ['blue', 'Green', 'Red'],
    );
    // A field that takes its options from the list.
    const field = ok(
      await send('POST', `/form/${formId}/field`, `field_type=select&label=Colour&smart_list=${list.id}`),
      201,
    );
    assert.deepEqual(
      field.options.map((o: any) => o.value),
      ['blue', 'Green', 'Red'],
    );
  });

  it('answers a smart-list field with its smart_list, and takes the field back as read (POST and PUT, JSON and form-encoded)', async () => {
    const list = ok(await call('POST', '/smartlist', { name: 'Sizes' }), 201);
    ok(
      await call('POST', `/smartlist/${list.id}/bulkoptions`, {
        options: [
          { label: 'Small', value: 's' },
          { label: 'Large', value: 'l' },
        ],
      }),
    );
    const made = ok(
      await send('POST', `/form/${formId}/field`, `field_type=select&label=Size&smart_list=${list.id}&default=s`),
      201,
    );
    assert.equal(made.smart_list, list.id);
    const read = ok(await call('GET', `/field/${made.id}.json`));
    assert.equal(read.smart_list, list.id);
    assert.deepEqual(read.options, [
      { label: 'Small', value: 's' },
      { label: 'Large', value: 'l' },
    ]);
    assert.equal(
      ok(await call('GET', `/form/${formId}`)).fields.find((f: any) => f.id === made.id).smart_list,
      list.id,
    );
    // A field of its own options names none.
    assert.equal(ok(await call('GET', `/field/${choice.id}`)).smart_list, null);

    // Sent back as read: the same field. A form encoder leaves out what is null (logic).
    const { logic: _logic, ...formEncodable } = read;
    const asV2025 = ok(await a.get(`/forms/${formId}/fields/${made.id}`));
    for (const [style, values] of [
      ['json', read],
      ['form', formEncodable],
    ] as const) {
      const put = ok(await call('PUT', `/field/${made.id}`, values, style));
      assert.deepEqual(put, read, style);
      const copy = ok(await call('POST', `/form/${formId}/field`, values, style), 201);
      assert.equal(copy.smart_list, list.id, style);
      assert.deepEqual(copy.options, read.options, style);
      assert.equal(copy.default, 's', style);
      assert.equal(ok(await a.get(`/forms/${formId}/fields/${copy.id}`)).smartList, Number(list.id));
      assertDeleted(await call('DELETE', `/field/${copy.id}`), copy.id);
    }
    const after = ok(await a.get(`/forms/${formId}/fields/${made.id}`));
    assert.deepEqual({ ...after, updated: asV2025.updated }, asV2025);

    // Options other than the list's are still refused with it: they would be dropped unseen.
    refused(
      await call(
        'PUT',
        `/field/${made.id}`,
        { smart_list: list.id, options: [{ label: 'Small', value: 's' }] },
        'json',
      ),
      /^body\.options$/,
    );
    refused(
      await call('POST', `/form/${formId}/field`, { ...read, options: [...read.options].reverse() }, 'json'),
      /^body\.options$/,
    );
    assertDeleted(await call('DELETE', `/field/${made.id}`), made.id);
  });

  it('reads the logic, recipients and format of emails from bracket parameters', async () => {
    const email = ok(await send('POST', `/form/${formId}/field`, 'field_type=email&label=Reply to'), 201);
    const notification = ok(
      await send(
        'POST',
        `/form/${formId}/notification`,
        'subject=New entry&message=Hello&format=text&recipients[]=ops@example.com&recipients[]=boss@example.com' +
          `&reply_to_field=${email.id}&logic[action]=show&logic[conditional]=any` +
          `&logic[checks][0][field]=${choice.id}&logic[checks][0][condition]=equals&logic[checks][0][option]=Yes`,
      ),
      201,
    );
    const stored = ok(await a.get(`/notifications/${notification.id}`));
    assert.deepEqual(stored.recipients, ['ops@example.com', 'boss@example.com']);
    assert.equal(stored.replyToField, Number(email.id));
    // `format` is an email's own here, not the answer's.
    assert.equal(stored.format, 'text');
    assert.deepEqual(stored.logic, {
      action: 'show',
      conditional: 'any',
      checks: [{ field: Number(choice.id), condition: 'equals', option: 'Yes' }],
    });
    assert.equal(notification.logic.checks[0].field, choice.id);
  });

  it('answers 400 with the details of the v2025 rule for bad nested values, never 500', async () => {
    const base = `field_type=text&label=Bad&logic[action]=show&logic[conditional]=all`;
    const check = `logic[checks][0][condition]=equals&logic[checks][0][option]=Yes`;
    const path = `/form/${formId}/field`;
    refused(await send('POST', path, `${base}&logic[checks][0][field]=twelve&${check}`), /logic\.checks\[0\]\.field/);
    refused(await send('POST', path, `${base}&logic[checks][0][field]=0&${check}`), /logic\.checks\[0\]\.field/);
    refused(
      await send('POST', path, `${base}&logic[checks][0][field][id]=${choice.id}&${check}`),
      /logic\.checks\[0\]\.field/,
    );
    refused(
      await send('POST', path, `${base}&logic[checks][0][field]=${choice.id}&logic[checks][0][condition]=like`),
      /logic\.checks\[0\]\.condition/,
    );
    refused(await send('POST', path, `${base}&logic[checks]=all`), /logic\.checks/);
    refused(await send('POST', path, `${base}&logic[checks][x][field]=${choice.id}`), /logic\.checks/);
    refused(await send('POST', path, 'field_type=text&label=Bad&logic[action]=blink'), /logic/);
    // A field that is not on the form: the field rule's 400.
    refused(await send('POST', path, `${base}&logic[checks][0][field]=999999&${check}`), /logic\.checks\[0\]\.field/);
    refused(await send('POST', path, 'field_type=select&label=Bad&options[0][label][x]=S'), /options/);
    refused(await send('POST', path, 'field_type=text&label=Bad&attributes[max_length]=long'), /attributes/);
    refused(await send('POST', path, 'label[0]=Bad&field_type=text'), /label/);
    refused(
      await send('POST', `/form/${formId}/notification`, `subject=S&message=M&recipients[0][address]=x@example.com`),
      /recipients/,
    );
    const list = ok(await send('POST', '/smartlist', 'name=Empty'), 201);
    refused(await send('POST', `/smartlist/${list.id}/bulkoptions`, 'options[0][value]=v'), /options/);
    refused(await send('POST', `/smartlist/${list.id}/bulkoptions`, 'options[0]=Blue'), /options/);
    // Prototype names are dropped at every level; nothing deeper than five levels is read.
    const safe = ok(
      await send(
        'POST',
        path,
        'field_type=text&label=Safe&logic[__proto__][polluted]=1&attributes[constructor][prototype]=1' +
          '&description[a][b][c][d][e]=deep',
      ),
      201,
    );
    assert.equal(safe.logic, null);
    assert.equal(safe.description, '');
    assert.equal(({} as any).polluted, undefined);
  });
});
