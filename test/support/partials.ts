import assert from 'node:assert/strict';
import type { TestAccount, TestApp } from './helpers.js';

/**
 * Saves a partial submission of the form the way a person does, through its hosted page
 * (turning settings.saveAndResume on first), and returns its id and resume token.
 */
export async function savePartialOf(
  app: TestApp,
  owner: TestAccount,
  formId: number,
  given?: { id: number; value: unknown }[],
): Promise<{ id: number; resumeToken: string }> {
  const form = await owner.get(`/forms/${formId}?withFields=true`);
  assert.equal(form.status, 200, form.text);
  // A save with nothing in it starts no partial (nothing_to_save): by default, one field's value.
  const fields = given ?? [someValue(form.body.fields)];
  if (!form.body.settings.saveAndResume) {
    const put = await owner.put(`/forms/${formId}`, { settings: { ...form.body.settings, saveAndResume: true } });
    assert.equal(put.status, 200, put.text);
  }
  const path = new URL(form.body.url).pathname;
  const saved = await app.request('POST', `${path}/partial`, { body: { fields, website: '' } });
  assert.equal(saved.status, 200, saved.text);
  const listed = await owner.get(`/form/${formId}/partialsubmission?order=DESC&pageSize=1`);
  assert.equal(listed.status, 200, listed.text);
  return { id: listed.body.partialSubmissions[0].id, resumeToken: saved.body.resumeToken };
}

const SAMPLES: Record<string, string> = {
  text: 'saved part way',
  textarea: 'saved part way',
  email: 'part@example.com',
};

function someValue(fields: { id: number; type: string }[]): { id: number; value: string } {
  const field = fields.find((f) => SAMPLES[f.type] !== undefined);
  assert.ok(field, 'the form has a text, textarea or email field to save a partial with');
  return { id: field.id, value: SAMPLES[field.type]! };
}
