/**
 * How outbox jobs keep a submission's values (src/modules/submissions/packed-entries.ts): packed
 * and unpacked again to the same detailed record and the same delivered bytes, and jobs written
 * before packing (whole entries) still accepted by their kind's schema and delivered the same.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { submissionEmailsFor } from '../../src/modules/emails/enqueue.js';
import { SendEmailPayload, unpackEmailPayload } from '../../src/modules/emails/payload.js';
import { packEntry, packSubmission, unpackSubmission } from '../../src/modules/submissions/packed-entries.js';
import type { Submission } from '../../src/modules/submissions/schemas.js';
import { webhookDeliveriesFor } from '../../src/modules/webhooks/enqueue.js';
import { DeliveryPayload, renderBody } from '../../src/modules/webhooks/payload.js';

const submission: Submission = {
  id: 41,
  formId: 7,
  timestamp: '2026-11-24T10:00:00.000Z',
  updated: '2026-11-24T10:00:00.000Z',
  userAgent: 'test',
  remoteAddr: '127.0.0.1',
  latitude: null,
  longitude: null,
  prettyName: 'Ada Lovelace',
  data: [
    { field: 1, label: 'Name', type: 'name', value: { first: 'Ada', last: 'Lovelace' }, displayValue: 'Ada Lovelace' },
    { field: 2, label: 'Company', type: 'text', value: 'Analytical', displayValue: 'Analytical' },
    { field: 3, label: 'Team size', type: 'number', value: 12, displayValue: '12' },
    { field: 4, label: 'Notes', type: 'textarea', value: '', displayValue: '' },
    { field: 5, label: 'Shown otherwise', type: 'text', value: 'raw', displayValue: 'Shown' },
  ].map((e) => ({ ...e, parsedValue: e.value })),
};

describe('packed entries of outbox jobs', () => {
  it('packs a detailed record smaller and unpacks it to the same record', () => {
    const packed = packSubmission(submission);
    assert.deepEqual(unpackSubmission(packed), submission);
    assert.ok(JSON.stringify(packed).length < JSON.stringify(submission).length * 0.7);
    // A string shown as it is keeps one copy; anything else keeps its display text.
    assert.deepEqual(packed.data[1], [2, 'Company', 'text', 'Analytical', null]);
    assert.deepEqual(packed.data[2], [3, 'Team size', 'number', 12, '12']);
    assert.deepEqual(packed.data[4], [5, 'Shown otherwise', 'text', 'raw', 'Shown']);
  });

  it('delivers the same webhook body from a packed job and from a job written before packing', () => {
    const event = (stored: unknown) => ({
      type: 'submission.created' as const,
      formId: 7,
      submissionId: 41,
      occurredAt: Date.parse('2026-11-24T10:00:00.000Z'),
      sealed: false,
      submission: stored,
    });
    const older = { webhookId: 1, messageId: 'msg_1', event: event(submission) };
    const packed = { webhookId: 1, messageId: 'msg_1', event: event(packSubmission(submission)) };
    assert.ok(Value.Check(DeliveryPayload, older));
    assert.ok(Value.Check(DeliveryPayload, packed));
    for (const contentType of ['json', 'urlencoded'] as const) {
      const settings = { contentType, includeFieldType: false, handshakeKey: undefined };
      assert.equal(
        renderBody(packed.event, settings).body.toString(),
        renderBody(older.event, settings).body.toString(),
      );
    }
    const json = JSON.parse(
      renderBody(packed.event, {
        contentType: 'json',
        includeFieldType: false,
        handshakeKey: undefined,
      }).body.toString(),
    );
    assert.deepEqual(json.data, submission);
  });

  it('accepts email jobs of either shape and reads the same values from both', () => {
    const entries = submission.data.map(({ parsedValue: _parsed, ...e }) => e);
    const base = {
      accountId: 1,
      formId: 7,
      emailId: 3,
      kind: 'notification' as const,
      submissionId: 41,
      timestamp: submission.timestamp,
      sealed: false,
    };
    const older = { ...base, data: entries };
    const packed = { ...base, data: entries.map(packEntry) };
    assert.ok(Value.Check(SendEmailPayload, older));
    assert.ok(Value.Check(SendEmailPayload, packed));
    assert.deepEqual(unpackEmailPayload(packed), older);
    assert.deepEqual(unpackEmailPayload(older), older);
    assert.ok(!Value.Check(SendEmailPayload, { ...base, data: [[1, 'Name']] }), 'a short packed entry is refused');
  });

  it("packs an event's values once for all its jobs, and each job reads them back whole", () => {
    const address = {
      field: 6,
      label: 'Email',
      type: 'email',
      value: 'ada@example.com',
      displayValue: 'ada@example.com',
    };
    const record = { ...submission, data: [...submission.data, { ...address, parsedValue: address.value }] };
    const event = {
      type: 'submission.created' as const,
      accountId: 1,
      formId: 7,
      submissionId: 41,
      occurredAt: Date.parse(submission.timestamp),
      sealed: false,
      submission: record,
    };
    const hooks = webhookDeliveriesFor(
      [
        { id: 1, events: ['submission.created'] },
        { id: 2, events: ['submission.deleted'] },
        { id: 3, events: ['submission.created', 'submission.updated'] },
      ],
      event,
    ).map((j) => j.payload as DeliveryPayload);
    const emails = submissionEmailsFor(
      [
        { id: 8, kind: 'notification', logic: null, recipient_field_id: null },
        { id: 9, kind: 'confirmation', logic: null, recipient_field_id: 6 },
      ],
      event,
    ).map((j) => j.payload as SendEmailPayload);
    assert.deepEqual(
      hooks.map((p) => p.webhookId),
      [1, 3],
      'only the webhooks that ask for the event',
    );
    assert.deepEqual(
      emails.map((p) => p.emailId),
      [8, 9],
    );
    // One packed array for every job of the event, webhook or email: not a copy a job.
    const packedOf = (p: DeliveryPayload) => (p.event.submission as { data: unknown }).data;
    const shared = packedOf(hooks[0]!);
    assert.equal(packedOf(hooks[1]!), shared);
    for (const p of emails) assert.equal(p.data, shared);
    assert.deepEqual(unpackSubmission(hooks[0]!.event.submission as Submission), record);
    assert.deepEqual(
      unpackEmailPayload(emails[0]!).data,
      record.data.map(({ parsedValue: _parsed, ...e }) => e),
    );
  });
});
