/**
 * Shared setup of the tests of creates made with createAlone (test/coalesced-statements,
 * test/sqlite-create-thread, test/pg-create-statements): a form with a unique email field and a
 * note, its revision, a create's arguments as the service makes them, the shared statements'
 * counters of /metrics, and the webhook deliveries the creates put in the outbox.
 */
import assert from 'node:assert/strict';
import type { SubmissionRow } from '../../src/db/schema.js';
import { formToken } from '../../src/modules/submissions/keywords.js';
import type { TestAccount, TestApp } from './helpers.js';

export interface UniqueForm {
  id: number;
  email: number;
  revision: number;
}

/** A form of a unique Email field and a Note, with its revision as stored. */
export async function uniqueEmailForm(app: TestApp, a: TestAccount, name: string): Promise<UniqueForm> {
  const reply = await a.post('/forms', {
    name,
    fields: [
      { type: 'email', label: 'Email', unique: true },
      { type: 'text', label: 'Note' },
    ],
  });
  assert.equal(reply.status, 200, reply.text);
  const form = reply.body as { id: number; fields: { id: number }[] };
  const revision = (
    await app.server.ctx.db.selectFrom('forms').select('revision').where('id', '=', form.id).executeTakeFirstOrThrow()
  ).revision;
  return { id: form.id, email: form.fields[0]!.id, revision };
}

/** A plain create's arguments for createAlone, as the service makes them. */
export const plainCreate = (
  a: TestAccount,
  form: { id: number; email: number },
  address: string,
  note: string,
  now = Date.now(),
) => ({
  row: {
    accountId: a.accountId,
    formId: form.id,
    userAgent: 'test',
    remoteAddr: '127.0.0.1',
    latitude: note === 'placed' ? 52.5 : null,
    longitude: note === 'placed' ? 13.4 : null,
  },
  w: {
    data: JSON.stringify({ [form.email]: address, note }),
    prettyName: address,
    tokens: note === '' ? [] : [formToken(form.id), note, note, 'common'],
    unique: [{ fieldId: form.email, norm: address }],
    now,
  },
});

/** A shared statements' counter of /metrics, for kind (0 before its first statement). */
async function shared(app: TestApp, name: string, kind: string): Promise<number> {
  const text = (await app.request('GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`kind="${kind}"`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

export const sharedCounters = async (app: TestApp, kind: string) => ({
  statements: await shared(app, 'formwork_db_shared_statements_total', kind),
  calls: await shared(app, 'formwork_db_shared_calls_total', kind),
  madeAgain: await shared(app, 'formwork_db_shared_calls_made_again_total', kind),
});

/** Creates i of form made with address p<i>@example.com were each written, as a row of their own. */
export function assertOwnRows(
  rows: (SubmissionRow | undefined)[],
  form: { id: number; email: number },
): asserts rows is SubmissionRow[] {
  rows.forEach((row, i) => {
    assert.ok(row, `create ${i} written`);
    assert.equal(row.form_id, form.id);
    assert.equal(row.pretty_name, `p${i}@example.com`);
    assert.equal(JSON.parse(row.data)[form.email], `p${i}@example.com`);
  });
  assert.equal(new Set(rows.map((r) => r!.id)).size, rows.length);
}

export interface Delivery {
  requestId: string | null;
  /** The record the event carries (its values packed: src/modules/submissions/packed-entries.ts). */
  record: { id: number; data: unknown[][] };
}

/** The webhook deliveries waiting in the outbox for the submissions of formId, by submission; at most one each. */
export async function deliveriesOf(app: TestApp, formId: number): Promise<Map<number, Delivery>> {
  const jobs = await app.server.ctx.db
    .selectFrom('jobs')
    .select(['payload', 'request_id'])
    .where('kind', '=', 'webhooks.deliver')
    .execute();
  const bySubmission = new Map<number, Delivery>();
  for (const job of jobs) {
    const { event } = JSON.parse(job.payload) as {
      event: { formId: number; submissionId: number; submission: Delivery['record'] };
    };
    if (event.formId !== formId) continue;
    assert.ok(!bySubmission.has(event.submissionId), `one delivery per submission: ${event.submissionId}`);
    bySubmission.set(event.submissionId, { requestId: job.request_id, record: event.submission });
  }
  return bySubmission;
}
