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
  fields: { id: number; value: unknown }[] = [],
): Promise<{ id: number; resumeToken: string }> {
  const form = await owner.get(`/forms/${formId}`);
  assert.equal(form.status, 200, form.text);
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
