import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { PDFDocument } from 'pdf-lib';
import PizZip from 'pizzip';
import type { AppContext } from '../src/context.js';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker, type Worker } from '../src/jobs/worker.js';
import type { Transaction } from 'kysely';
import type { Database } from '../src/db/schema.js';
import { transact } from '../src/db/transaction.js';
import { generateDocument } from '../src/modules/docmerge/generate.js';
import { documentStorageKey } from '../src/modules/docmerge/keys.js';
import { bytesUnder } from './support/disk.js';
import { makeDocx, makePdf, pdfHex, readDocx, readFlattenedPdf, readPdfFields } from './support/docmerge-templates.js';
import { startSmtpSink, type SmtpSink } from './support/smtp.js';
import {
  dialectName,
  dumpData,
  startTestApp,
  type Reply,
  type TestAccount,
  type TestApp,
  expectStatus,
} from './support/helpers.js';
import { nodeArgs } from './support/node-entry.js';

const PASSWORD = 'documents are sealed too';
const withPassword = { headers: { 'x-formwork-encryption-password': PASSWORD } };
// The child worker process must open what this app wraps: one SECRET_KEY for both.
const SECRET_KEY = 'docmerge-test-secret-key-0123456789abcdef';

const b64 = (bytes: Buffer) => bytes.toString('base64');

/** A value that must come out escaped in a DOCX: markup, an ampersand, quotes. */
const HOSTILE = 'Tom <b>&"Jerry"</b>';

async function download(app: TestApp, acc: TestAccount, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${app.url}/api/v2025${path}`, {
    headers: { authorization: `Bearer ${acc.token}`, ...headers },
  });
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    disposition: res.headers.get('content-disposition'),
    bytes: Buffer.from(await res.arrayBuffer()),
  };
}

async function preview(app: TestApp, acc: TestAccount, formId: number, id: number, submissionId: number) {
  const res = await fetch(`${app.url}/api/v2025/forms/${formId}/integrations/${id}/preview`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acc.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ submissionId }),
  });
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
}

describe(`document merge (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let worker: Worker;
  let a: TestAccount;
  let b: TestAccount;
  let form: { id: number; ids: Record<string, number> };

  const runs = async (formId: number, id: number) =>
    expectStatus(await a.get(`/forms/${formId}/integrations/${id}/runs`), 200, 'runs').runs as any[];
  const documents = async (submissionId: number, options = {}) =>
    (expectStatus(await a.get(`/submissions/${submissionId}`, options), 200, 'submission').documents as any[]) ?? [];

  before(async () => {
    app = await startTestApp({ SECRET_KEY, WORKER_POLL_MS: '50' });
    ctx = app.server.ctx;
    worker = createWorker(ctx, { kinds: jobKinds });
    a = await app.account('A');
    b = await app.account('B');
    const created = expectStatus(
      await a.post('/forms', {
        name: 'Orders',
        fields: [
          { type: 'text', label: 'Full name' },
          { type: 'email', label: 'Email' },
          {
            type: 'checkbox',
            label: 'Toppings',
            options: [
              { label: 'Ham & eggs', value: 'ham' },
              { label: 'Cheese', value: 'cheese' },
              { label: 'Olives', value: 'olives' },
            ],
          },
          { type: 'file', label: 'Photo', attributes: { maxFiles: 3 } },
          {
            type: 'matrix',
            label: 'Rate',
            attributes: { rows: ['Speed', 'Price'], columns: ['Bad', 'Good'], multiple: false },
          },
          {
            type: 'select',
            label: 'Topic',
            options: [
              { label: 'Sales', value: 'sales' },
              { label: 'Support', value: 'support' },
            ],
          },
        ],
      }),
      200,
      'form',
    );
    form = { id: created.id, ids: Object.fromEntries(created.fields.map((f: any) => [f.label, f.id])) };
  });
  after(() => app.close());
  // Each test starts with no integration on the shared form, whatever an earlier one left.
  beforeEach(async () => {
    await worker.runDue();
    await ctx.db.deleteFrom('docmerge_integrations').execute();
  });

  const submit = async (values: { name: string; topic?: string; toppings?: string[]; files?: string[] }) =>
    expectStatus(
      await a.post(`/forms/${form.id}/submissions`, {
        fields: [
          { id: form.ids['Full name'], value: values.name },
          { id: form.ids.Email, value: 'buyer@example.com' },
          { id: form.ids.Toppings, value: values.toppings ?? ['ham', 'olives'] },
          ...(values.files ? [{ id: form.ids.Photo, value: values.files }] : []),
          { id: form.ids.Rate, value: { Speed: 'Good', Price: 'Bad' } },
          { id: form.ids.Topic, value: values.topic ?? 'sales' },
        ],
      }),
      200,
      'submit',
    );

  it('merges every value of a submission into a DOCX, escaped, with loops, and attaches and emails the document', async () => {
    const template = makeDocx([
      'Dear {Full name},',
      'Email: {field_' + form.ids.Email + '}',
      'Toppings: {Toppings}',
      '{#Toppings}* {value}{/Toppings}',
      '{#Toppings}[{value} for {Email}]{/Toppings}',
      '{#Photo}File {name} ({size} bytes){/Photo}',
      '{#Rate}{row}={value};{/Rate}',
      'Chosen: {Subject}',
      'Order {submission_id} of {form_name}',
    ]);
    const created = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        name: 'Receipt',
        template: { filename: 'receipt.docx', content: b64(template) },
        mapping: { Subject: form.ids.Topic },
        fileName: 'Receipt {Full name}',
        email: { to: ['office@example.com'], subject: 'Receipt for {Full name}' },
      }),
      201,
      'create',
    );
    assert.equal(created.kind, 'docmerge');
    assert.deepEqual(created.template, { kind: 'docx', filename: 'receipt.docx', size: template.length });
    assert.deepEqual(
      created.tags.sort(),
      [
        'Full name',
        'Photo',
        'Rate',
        'Subject',
        'Toppings',
        `field_${form.ids.Email}`,
        'form_name',
        'submission_id',
      ].sort(),
    );
    assert.equal(created.mapping.Subject, form.ids.Topic);
    assert.equal(created.mapping['Full name'], form.ids['Full name'], 'a tag named after a label');
    assert.equal(created.mapping[`field_${form.ids.Email}`], form.ids.Email, 'a tag named after an id');
    assert.equal(created.mapping.submission_id, null, 'a built-in tag');
    assert.equal(created.active, true);
    expectStatus(await a.get(`/forms/${form.id}/integrations/${created.id}`), 200, 'read');
    const list = expectStatus(await a.get(`/forms/${form.id}/integrations`), 200, 'list');
    assert.deepEqual(
      list.integrations.map((i: any) => i.id),
      [created.id],
    );
    // Under /api/v2 with .json too.
    const v2 = await app.request('GET', `/api/v2/forms/${form.id}/integrations/${created.id}.json`, { token: a.token });
    assert.equal(v2.status, 200);
    assert.equal(v2.body.id, created.id);

    const photo = `pic <1>.png;${b64(Buffer.from('not really a png'))}`;
    const submission = await submit({ name: HOSTILE, files: [photo] });
    assert.deepEqual(await documents(submission.id), [], 'nothing is made before the worker runs');
    await worker.runDue();
    await worker.runDue(); // the email job the generation enqueued

    const [document] = await documents(submission.id);
    assert.ok(document, 'the detailed record lists the document');
    assert.equal(document.integrationId, created.id);
    assert.equal(document.name, 'Receipt Tom b & Jerry b.docx', 'no markup, quotes or slashes in the file name');
    const file = await download(app, a, `/submissions/${submission.id}/documents/${document.id}`);
    assert.equal(file.status, 200);
    assert.equal(file.type, 'application/vnd.openxmlformats-officedocument.wordprocessingml.document');
    assert.equal(file.bytes.length, document.size);
    const { xml, text } = readDocx(file.bytes);
    assert.ok(xml.includes('Tom &lt;b&gt;&amp;&quot;Jerry&quot;&lt;/b&gt;'), xml);
    assert.ok(!xml.includes('<b>'), 'no markup of the value reaches the XML');
    assert.deepEqual(text.split('\n'), [
      `Dear ${HOSTILE},`,
      'Email: buyer@example.com',
      'Toppings: Ham & eggs, Olives',
      '* Ham & eggs* Olives',
      '[Ham & eggs for buyer@example.com][Olives for buyer@example.com]',
      'File pic <1>.png (16 bytes)',
      'Speed=Good;Price=Bad;',
      'Chosen: Sales',
      `Order ${submission.id} of Orders`,
    ]);

    const [run] = await runs(form.id, created.id);
    assert.equal(run.outcome, 'made');
    assert.equal(run.documentId, document.id);
    assert.equal(run.submissionId, submission.id);

    const mail = expectStatus(await a.get('/mail-log'), 200, 'mail log').messages.find(
      (m: any) => m.kind === 'document',
    );
    assert.ok(mail, 'the document was emailed (into the mail log, without SMTP_URL)');
    assert.deepEqual(mail.to, ['office@example.com']);
    assert.equal(mail.subject, `Receipt for ${HOSTILE}`);
    assert.deepEqual(mail.attachments, [{ name: document.name, size: document.size, contentType: file.type }]);

    // The preview merges without keeping anything.
    const jobsBefore = await ctx.db.selectFrom('jobs').select('id').execute();
    const shown = await preview(app, a, form.id, created.id, submission.id);
    assert.equal(shown.status, 200);
    assert.equal(readDocx(shown.bytes).text, text);
    assert.equal((await documents(submission.id)).length, 1);
    assert.equal((await ctx.db.selectFrom('jobs').select('id').execute()).length, jobsBefore.length);

    // A preview holds the submission's values: a token of forms:read alone, which reads no
    // submission (its document's download is refused to it), gets none of them.
    const tokenOf = async (scope: string) =>
      expectStatus(await a.post('/tokens', { name: scope, scopes: [scope] }), 200, `${scope} token`).token as string;
    const formsReader = { ...a, token: await tokenOf('forms:read') };
    const submissionsReader = { ...a, token: await tokenOf('submissions:read') };
    assert.equal(
      (await download(app, formsReader, `/submissions/${submission.id}/documents/${document.id}`)).status,
      403,
    );
    const refused = await preview(app, formsReader, form.id, created.id, submission.id);
    assert.equal(refused.status, 403);
    assert.equal(JSON.parse(refused.bytes.toString()).code, 'insufficient_scope');
    const allowed = await preview(app, submissionsReader, form.id, created.id, submission.id);
    assert.equal(allowed.status, 200);
    assert.equal(readDocx(allowed.bytes).text, text);

    // Another account: 404 for the integration, its preview and the document.
    expectStatus(await b.get(`/forms/${form.id}/integrations/${created.id}`), 404, 'B reads');
    assert.equal((await download(app, b, `/submissions/${submission.id}/documents/${document.id}`)).status, 404);
    assert.equal((await preview(app, b, form.id, created.id, submission.id)).status, 404);

    // Deleting the submission removes the document's object once the removal job runs.
    const stored = await ctx.db
      .selectFrom('docmerge_documents')
      .select('storage_key')
      .where('id', '=', document.id)
      .executeTakeFirstOrThrow();
    assert.ok(await ctx.storage.head(stored.storage_key));
    expectStatus(await a.delete(`/submissions/${submission.id}`), 200, 'delete submission');
    await worker.runDue();
    assert.equal(await ctx.storage.head(stored.storage_key), undefined);

    expectStatus(await a.delete(`/forms/${form.id}/integrations/${created.id}`), 200, 'delete integration');
    expectStatus(await a.get(`/forms/${form.id}/integrations/${created.id}`), 404, 'gone', 'integration_not_found');
  });

  it('fills a PDF: fields read back when kept fillable, drawn into the page when flattened', async () => {
    const template = await makePdf({
      texts: ['Full name', 'Order number'],
      checkBox: 'Agreed',
      dropdown: { name: 'Topic', options: ['sales', 'support'] },
    });
    const mapping = { 'Order number': null, Agreed: form.ids.Toppings };
    const fillable = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'certificate.pdf', content: b64(template) },
        mapping: { ...mapping, 'Order number': null },
        fileName: 'Certificate {submission_id}',
        flatten: false,
      }),
      201,
      'fillable PDF',
    );
    assert.deepEqual(fillable.tags, ['Full name', 'Order number', 'Agreed', 'Topic']);
    const flat = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'certificate.pdf', content: b64(template) },
        mapping,
      }),
      201,
      'flattened PDF',
    );
    const name = "Zoë O'Brien & Co";
    const submission = await submit({ name, topic: 'support' });
    await worker.runDue();
    const made = await documents(submission.id);
    assert.deepEqual(made.map((d: any) => d.integrationId).sort(), [fillable.id, flat.id].sort());

    const one = made.find((d: any) => d.integrationId === fillable.id);
    assert.equal(one.name, `Certificate ${submission.id}.pdf`);
    const fields = await readPdfFields(
      (await download(app, a, `/submissions/${submission.id}/documents/${one.id}`)).bytes,
    );
    assert.deepEqual(fields, { 'Full name': name, 'Order number': '', Agreed: 'checked', Topic: 'support' });

    const other = made.find((d: any) => d.integrationId === flat.id);
    const pdf = await readFlattenedPdf(
      (await download(app, a, `/submissions/${submission.id}/documents/${other.id}`)).bytes,
    );
    assert.equal(pdf.fields, 0, 'no form fields are left');
    assert.ok(pdf.streams.includes(pdfHex(name)), 'the name is drawn into the page');
    assert.ok(pdf.streams.includes(pdfHex('support')), 'the topic is drawn into the page');

    for (const id of [fillable.id, flat.id])
      expectStatus(await a.delete(`/forms/${form.id}/integrations/${id}`), 200, 'delete');
  });

  it('skips a submission whose values do not meet the conditions, and logs why', async () => {
    const created = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'sales.docx', content: b64(makeDocx(['Lead: {Full name}'])) },
        logic: {
          action: 'show',
          conditional: 'all',
          checks: [{ field: form.ids.Topic, condition: 'equals', option: 'sales' }],
        },
      }),
      201,
      'create',
    );
    const support = await submit({ name: 'Support Sam', topic: 'support' });
    const sales = await submit({ name: 'Sales Sue', topic: 'sales' });
    await worker.runDue();
    assert.deepEqual(await documents(support.id), [], 'the conditions did not hold');
    const [document] = await documents(sales.id);
    assert.ok(document);
    const log = await runs(form.id, created.id);
    assert.deepEqual(
      log.map((r: any) => [r.submissionId, r.outcome]).sort(),
      [
        [sales.id, 'made'],
        [support.id, 'skipped'],
      ].sort(),
    );
    assert.equal(log.find((r: any) => r.outcome === 'skipped').error, 'the conditions did not hold');

    // Turned off, it makes nothing.
    expectStatus(await a.put(`/forms/${form.id}/integrations/${created.id}`, { active: false }), 200, 'off');
    const later = await submit({ name: 'Sales Sid', topic: 'sales' });
    await worker.runDue();
    assert.deepEqual(await documents(later.id), []);
    expectStatus(await a.delete(`/forms/${form.id}/integrations/${created.id}`), 200, 'delete');
  });

  it('refuses at create a template that cannot be read, tags that name no field, and a mapping to another form, naming each', async () => {
    const other = expectStatus(
      await a.post('/forms', { name: 'Other', fields: [{ type: 'text', label: 'Elsewhere' }] }),
      200,
      'other form',
    );
    const before = await dumpData(app);
    const create = (body: Record<string, unknown>) => a.post(`/forms/${form.id}/integrations/docmerge`, body);
    const details = (res: Reply) =>
      (expectStatus(res, 400, 'refused', 'invalid_integration').details as any[]).map((d) => [d.property, d.message]);

    const unclosed = details(
      await create({ template: { filename: 't.docx', content: b64(makeDocx(['Hi {Full name'])) } }),
    );
    assert.equal(unclosed.length, 1);
    assert.equal(unclosed[0]![0], 'body.template');
    assert.match(unclosed[0]![1], /unclosed/i);

    const notZip = details(
      await create({ template: { filename: 't.docx', content: b64(Buffer.from('just some text')) } }),
    );
    assert.deepEqual(notZip, [['body.template', 't.docx is not a DOCX file']]);
    const pdfAsDocx = details(
      await create({ template: { filename: 't.docx', content: b64(await makePdf({ texts: ['x'] })) } }),
    );
    assert.match(pdfAsDocx[0]![1], /is not a DOCX file \(it is a PDF\)/);
    const brokenPdf = details(
      await create({ template: { filename: 't.pdf', content: b64(Buffer.from('%PDF-1.7 garbage')) } }),
    );
    assert.equal(brokenPdf[0]![0], 'body.template');
    details(await create({ template: { filename: 't.docx', content: 'not base64!' } }));

    const problems = details(
      await create({
        template: { filename: 't.docx', content: b64(makeDocx(['{Full name} {Nobody} {Nothing here}', '{Mapped}'])) },
        mapping: { Mapped: other.fields[0].id },
        fileName: 'Doc {Missing}',
      }),
    );
    assert.deepEqual(problems, [
      ['body.mapping.Mapped', `must be a field of this form; ${other.fields[0].id} is not`],
      [
        'body.template',
        'the tag "Nobody" names no field of this form (map it in mapping, or name it after a field\'s label or id)',
      ],
      [
        'body.template',
        'the tag "Nothing here" names no field of this form (map it in mapping, or name it after a field\'s label or id)',
      ],
      [
        'body.fileName',
        'the tag "Missing" names no field of this form (map it in mapping, or name it after a field\'s label or id)',
      ],
    ]);
    const pdfProblems = details(
      await create({
        template: { filename: 't.pdf', content: b64(await makePdf({ texts: ['Full name', 'Stranger'] })) },
      }),
    );
    assert.deepEqual(
      pdfProblems.map((p) => p[0]),
      ['body.template'],
    );
    assert.match(pdfProblems[0]![1], /the PDF field "Stranger"/);

    const badLogic = details(
      await create({
        template: { filename: 't.docx', content: b64(makeDocx(['{Full name}'])) },
        logic: { action: 'show', conditional: 'all', checks: [{ field: other.fields[0].id, condition: 'notempty' }] },
      }),
    );
    assert.equal(badLogic[0]![0], 'body.logic.checks[0].field');

    // Schema problems: both content and fileKey missing, an unknown property.
    expectStatus(await create({ template: { filename: 't.docx' } }), 400, 'no bytes', 'invalid_integration');
    expectStatus(await create({ template: { filename: 't.txt', content: 'aGk=' } }), 400, 'not docx or pdf');
    expectStatus(
      await create({ template: { filename: 't.docx', content: 'aGk=' }, secret: 1 }),
      400,
      'unknown property',
    );
    // Another account's form: 404.
    expectStatus(
      await b.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 't.docx', content: b64(makeDocx(['x'])) },
      }),
      404,
      'B',
    );
    assert.equal(await dumpData(app), before, 'a refused create writes nothing');
  });

  it("seals an encrypted form's documents: no plaintext in storage or the database, opened only with the password", async () => {
    const secret = 'Narwhal-Secret-Value-7731';
    const sealed = expectStatus(
      await a.post('/forms', {
        name: 'Sealed',
        isEncrypted: true,
        encryptionPassword: PASSWORD,
        fields: [{ type: 'text', label: 'Secret' }],
      }),
      200,
      'encrypted form',
    );
    const fieldId = sealed.fields[0].id;
    const template = makeDocx(['The secret is {Secret}.']);
    const integration = expectStatus(
      await a.post(`/forms/${sealed.id}/integrations/docmerge`, {
        template: { filename: 'sealed.docx', content: b64(template) },
        fileName: 'Secret {Secret} of {submission_id}',
        email: { to: ['office@example.com'], subject: 'About {Secret}' },
      }),
      201,
      'create',
    );
    const submission = expectStatus(
      await a.post(`/forms/${sealed.id}/submissions`, { fields: [{ id: fieldId, value: secret }] }),
      200,
      'submit',
    );
    await worker.runDue();
    await worker.runDue();
    const [document] = await documents(submission.id, withPassword);
    assert.ok(document);
    assert.deepEqual(
      (await runs(sealed.id, integration.id)).map((r: any) => r.outcome),
      ['made'],
    );
    const row = await ctx.db
      .selectFrom('docmerge_documents')
      .selectAll()
      .where('id', '=', document.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.sealed, 1);
    assert.equal(document.name, `Secret of ${submission.id}.docx`, "no value in an encrypted form's file name");
    const object = (await import('node:fs')).readFileSync(join(app.config.dataDir, 'files', row.storage_key));
    assert.notEqual(object.subarray(0, 2).toString('latin1'), 'PK', 'the stored object is no zip');
    assert.throws(() => new PizZip(object));
    assert.ok(!bytesUnder(join(app.config.dataDir, 'files')).includes(secret));
    assert.ok(
      !(await dumpData(app)).includes(secret),
      'no copy of the value stays in the database (job payloads included)',
    );

    const without = await download(app, a, `/submissions/${submission.id}/documents/${document.id}`);
    assert.equal(without.status, 401);
    const wrong = await download(app, a, `/submissions/${submission.id}/documents/${document.id}`, {
      'x-formwork-encryption-password': 'not the password',
    });
    assert.equal(wrong.status, 401);
    const opened = await download(
      app,
      a,
      `/submissions/${submission.id}/documents/${document.id}`,
      withPassword.headers,
    );
    assert.equal(opened.status, 200);
    assert.equal(readDocx(opened.bytes).text, `The secret is ${secret}.`);

    // The email says where to download it, and attaches nothing.
    const mail = expectStatus(await a.get('/mail-log'), 200, 'mail log').messages.find(
      (m: any) => m.kind === 'document' && m.submissionId === submission.id,
    );
    assert.ok(mail);
    assert.deepEqual(mail.attachments, []);
    assert.ok(!mail.text.includes(secret) && !mail.subject.includes(secret));
  });

  it('retries a failed generation on its schedule, logging each attempt', async () => {
    const created = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'retry.docx', content: b64(makeDocx(['Retried for {Full name}'])) },
      }),
      201,
      'create',
    );
    // The stored template damaged behind the service's back: each attempt fails until it is put right.
    const good = await ctx.db
      .selectFrom('docmerge_integrations')
      .select('template')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    const setTemplate = (template: string) =>
      ctx.db.updateTable('docmerge_integrations').set({ template }).where('id', '=', created.id).execute();
    await setTemplate(b64(Buffer.from('no longer a zip')));
    const submission = await submit({ name: 'Retried Rita' });
    await worker.runDue();
    let [run] = await runs(form.id, created.id);
    assert.equal(run.outcome, 'failed');
    assert.match(run.error, /is not a DOCX file/);
    assert.ok(run.nextAttempt, 'a next attempt is scheduled');
    assert.deepEqual(await documents(submission.id), []);

    await setTemplate(good.template);
    await worker.runDue();
    assert.deepEqual(await documents(submission.id), [], 'not before the next attempt is due');
    ctx.clock.advance(Date.parse(run.nextAttempt) - ctx.clock.now() + 1000);
    await worker.runDue();
    [run] = await runs(form.id, created.id);
    assert.equal(run.outcome, 'made');
    assert.equal(run.attempt, 2);
    assert.equal((await documents(submission.id)).length, 1);
  });

  it("converts a form's documents with its submissions when encryption is turned on and off", async () => {
    const plain = expectStatus(
      await a.post('/forms', { name: 'Turned', fields: [{ type: 'text', label: 'Word' }] }),
      200,
      'form',
    );
    expectStatus(
      await a.post(`/forms/${plain.id}/integrations/docmerge`, {
        template: { filename: 'turned.docx', content: b64(makeDocx(['The word is {Word}.'])) },
      }),
      201,
      'create',
    );
    const word = 'Pangolin-Word-4471';
    const submission = expectStatus(
      await a.post(`/forms/${plain.id}/submissions`, { fields: [{ id: plain.fields[0].id, value: word }] }),
      200,
      'submit',
    );
    await worker.runDue();
    const [document] = await documents(submission.id);
    const row = () =>
      ctx.db.selectFrom('docmerge_documents').selectAll().where('id', '=', document.id).executeTakeFirstOrThrow();
    const plainKey = (await row()).storage_key;
    const path = `/submissions/${submission.id}/documents/${document.id}`;

    expectStatus(await a.put(`/forms/${plain.id}`, { isEncrypted: true, encryptionPassword: PASSWORD }), 200, 'on');
    await worker.runDue(); // the conversion
    await worker.runDue(); // the removal of the plain object
    const sealedRow = await row();
    assert.equal(sealedRow.sealed, 1);
    assert.notEqual(sealedRow.storage_key, plainKey);
    assert.equal(await ctx.storage.head(plainKey), undefined, 'the plain object is gone');
    const stored = (await import('node:fs')).readFileSync(join(app.config.dataDir, 'files', sealedRow.storage_key));
    assert.throws(() => new PizZip(stored), 'the stored object is sealed');
    assert.equal((await download(app, a, path)).status, 401);
    const opened = await download(app, a, path, withPassword.headers);
    assert.equal(readDocx(opened.bytes).text, `The word is ${word}.`);

    expectStatus(await a.put(`/forms/${plain.id}`, { isEncrypted: false, encryptionPassword: PASSWORD }), 200, 'off');
    await worker.runDue();
    await worker.runDue();
    assert.equal((await row()).sealed, 0);
    const again = await download(app, a, path);
    assert.equal(again.status, 200);
    assert.equal(readDocx(again.bytes).text, `The word is ${word}.`);
  });

  it('makes the document once when the worker is killed in the middle of the job', async () => {
    const integration = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'once.docx', content: b64(makeDocx(['Once for {Full name}'])) },
      }),
      201,
      'create',
    );
    const submission = await submit({ name: 'Killed Kim' });
    const child = spawn(process.execPath, nodeArgs('test/support/docmerge-worker-child.ts'), {
      env: {
        PATH: process.env.PATH,
        DATA_DIR: app.config.dataDir,
        LOG_LEVEL: 'silent',
        WORKER_POLL_MS: '50',
        SECRET_KEY,
        ...(app.config.databaseUrl ? { DATABASE_URL: app.config.databaseUrl } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.once('exit', (code, signal) => resolve(signal ?? code)),
    );
    let stdout = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes('stored')) resolve();
      });
      void exited.then((how) => reject(new Error(`the worker ended (${String(how)}) before storing: ${stderr}`)));
    });
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');

    // Killed after the object was written, before its row: no document yet, the job still held.
    assert.deepEqual(await documents(submission.id), []);
    const job = await ctx.db
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', 'docmerge.generate')
      .where('state', '=', 'running')
      .executeTakeFirstOrThrow();
    const keys = () =>
      ctx.db
        .selectFrom('docmerge_documents')
        .select('storage_key')
        .where('submission_id', '=', submission.id)
        .execute();

    await worker.runDue();
    const held = await ctx.db.selectFrom('jobs').select('state').where('id', '=', job.id).executeTakeFirstOrThrow();
    assert.equal(held.state, 'running', 'the dead worker still holds the lease');
    assert.deepEqual(await documents(submission.id), []);
    ctx.clock.advance(ctx.config.jobLeaseSeconds * 1000 + 1000);
    await worker.runDue();
    const made = await documents(submission.id);
    assert.equal(made.length, 1, 'made once');
    assert.equal((await keys()).length, 1);
    const { text } = readDocx((await download(app, a, `/submissions/${submission.id}/documents/${made[0].id}`)).bytes);
    assert.equal(text, 'Once for Killed Kim');

    // The same job run again (a worker that died after the commit, before the job was marked done) makes nothing more.
    await ctx.db
      .updateTable('jobs')
      .set({ state: 'queued', run_at: 0, lease_until: null })
      .where('id', '=', job.id)
      .execute();
    await worker.runDue();
    assert.equal((await documents(submission.id)).length, 1);
    const log = await runs(form.id, integration.id);
    assert.deepEqual(
      log.map((r: any) => r.outcome),
      ['exists', 'made'],
    );
    expectStatus(await a.delete(`/forms/${form.id}/integrations/${integration.id}`), 200, 'delete');
  });

  it('removes the object of a document whose submission was deleted while it was made', async () => {
    const integration = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'late.docx', content: b64(makeDocx(['Late for {Full name}'])) },
      }),
      201,
      'create',
    );
    const submission = await submit({ name: 'Deleted Dee' });
    const job = await ctx.db
      .selectFrom('jobs')
      .select(['id', 'payload'])
      .where('kind', '=', 'docmerge.generate')
      .where('state', '=', 'queued')
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    await ctx.db.updateTable('jobs').set({ state: 'done' }).where('id', '=', job.id).execute();
    // The run made and stored its document; its record waits for the end of the run.
    const ends: ((trx: Transaction<Database>) => Promise<void>)[] = [];
    await generateDocument(
      ctx,
      { id: job.id, kind: 'docmerge.generate', payload: JSON.parse(job.payload), progress: undefined, attempt: 1 },
      {
        signal: new AbortController().signal,
        checkpoint: async () => undefined,
        replacePayload: async () => undefined,
        atEnd: (write) => void ends.push(write),
      },
    );
    assert.equal(ends.length, 1);
    const { account_id } = await ctx.db
      .selectFrom('forms')
      .select('account_id')
      .where('id', '=', form.id)
      .executeTakeFirstOrThrow();
    const key = documentStorageKey({ account_id, form_id: form.id, id: integration.id }, submission.id, 'docx');
    assert.ok(await ctx.storage.head(key), 'the document was stored');
    expectStatus(await a.delete(`/submissions/${submission.id}`), 200, 'delete meanwhile');
    await transact(ctx.db, ends[0]!);
    assert.deepEqual(
      (await runs(form.id, integration.id)).map((r: any) => [r.outcome, r.error]),
      [['skipped', 'the submission or its form was deleted']],
    );
    await worker.runDue();
    assert.equal(await ctx.storage.head(key), undefined, 'its object went with it');
    expectStatus(await a.delete(`/forms/${form.id}/integrations/${integration.id}`), 200, 'delete');
  });

  it('copies its integrations with a form, pointed at the copied fields, and previews a replacement template', async () => {
    const created = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: {
          filename: 'copy.docx',
          content: b64(makeDocx([`{Full name} / {field_${form.ids.Email}} / {Chosen}`])),
        },
        mapping: { Chosen: form.ids.Topic },
        logic: {
          action: 'show',
          conditional: 'all',
          checks: [{ field: form.ids.Topic, condition: 'equals', option: 'sales' }],
        },
      }),
      201,
      'create',
    );
    const copy = expectStatus(await a.post(`/forms/${form.id}/copy?includeIntegrations=true`), 200, 'copy form');
    const copyIds: Record<string, number> = Object.fromEntries(copy.fields.map((f: any) => [f.label, f.id]));
    const [copied] = expectStatus(await a.get(`/forms/${copy.id}/integrations`), 200, 'list').integrations;
    assert.notEqual(copied.id, created.id);
    assert.equal(copied.mapping.Chosen, copyIds.Topic);
    assert.equal(copied.mapping[`field_${form.ids.Email}`], copyIds.Email);
    assert.equal(copied.logic.checks[0].field, copyIds.Topic);
    const submission = expectStatus(
      await a.post(`/forms/${copy.id}/submissions`, {
        fields: [
          { id: copyIds['Full name'], value: 'Copied Cora' },
          { id: copyIds.Email, value: 'cora@example.com' },
          { id: copyIds.Topic, value: 'sales' },
        ],
      }),
      200,
      'submit to the copy',
    );
    await worker.runDue();
    const [document] = await documents(submission.id);
    assert.equal(document.integrationId, copied.id);
    const file = await download(app, a, `/submissions/${submission.id}/documents/${document.id}`);
    assert.equal(readDocx(file.bytes).text, 'Copied Cora / cora@example.com / Sales');

    // A replacement template, tried against the submission without changing the integration.
    const tried = await fetch(`${app.url}/api/v2025/forms/${copy.id}/integrations/${copied.id}/preview`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        submissionId: submission.id,
        template: { filename: 'next.docx', content: b64(makeDocx(['Next: {Full name} ({Chosen})'])) },
      }),
    });
    assert.equal(tried.status, 200);
    assert.equal(readDocx(Buffer.from(await tried.arrayBuffer())).text, 'Next: Copied Cora (Sales)');
    const refused = await a.post(`/forms/${copy.id}/integrations/${copied.id}/preview`, {
      submissionId: submission.id,
      template: { filename: 'next.docx', content: b64(makeDocx(['{Unknown tag}'])) },
    });
    expectStatus(refused, 400, 'a replacement naming no field', 'invalid_integration');
    // A submission of another form: 404.
    const elsewhere = await a.post(`/forms/${copy.id}/integrations/${copied.id}/preview`, { submissionId: 1 });
    expectStatus(elsewhere, 404, 'another form', 'submission_not_found');
    assert.equal(
      expectStatus(await a.get(`/forms/${copy.id}/integrations/${copied.id}`), 200, 'unchanged').template.filename,
      'copy.docx',
    );
  });

  it('reads a template from the upload flow by fileKey, and previews a PDF', async () => {
    const upload = expectStatus(
      await a.post(`/forms/${form.id}/fields/${form.ids.Photo}/upload-urls`, { filenames: ['template.docx'] }),
      200,
      'upload url',
    ).uploads[0];
    const url = upload.uploadUrl.startsWith(app.config.publicUrl)
      ? app.url + upload.uploadUrl.slice(app.config.publicUrl.length)
      : upload.uploadUrl;
    const put = await fetch(url, { method: 'PUT', body: makeDocx(['From an upload: {Full name}']) });
    assert.ok(put.ok, `upload: ${put.status}`);
    const created = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'template.docx', fileKey: upload.fileKey },
      }),
      201,
      'create from fileKey',
    );
    assert.deepEqual(created.tags, ['Full name']);
    const submission = await submit({ name: 'Uploaded Una' });
    const shown = await preview(app, a, form.id, created.id, submission.id);
    assert.equal(shown.status, 200);
    assert.equal(readDocx(shown.bytes).text, 'From an upload: Uploaded Una');
    // The original service's clients: /api/v2 with .json.
    const v2 = await app.request('POST', `/api/v2/forms/${form.id}/integrations/docmerge.json`, {
      token: a.token,
      body: { template: { filename: 'v2.docx', content: b64(makeDocx(['v2 {Full name}'])) }, active: false },
    });
    assert.equal(v2.status, 201, v2.text);
    expectStatus(await a.delete(`/forms/${form.id}/integrations/${v2.body.id}`), 200, 'delete v2');
    const unknown = await a.post(`/forms/${form.id}/integrations/docmerge`, {
      template: { filename: 'template.docx', fileKey: 'fk_nothing' },
    });
    expectStatus(unknown, 400, 'unknown fileKey', 'invalid_integration');
    // A PDF preview opens as a PDF.
    const pdf = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'p.pdf', content: b64(await makePdf({ texts: ['Full name'] })) },
        active: false,
      }),
      201,
      'pdf',
    );
    const pdfPreview = await preview(app, a, form.id, pdf.id, submission.id);
    assert.equal(pdfPreview.status, 200);
    assert.equal((await PDFDocument.load(pdfPreview.bytes)).getPageCount(), 1);
    for (const id of [created.id, pdf.id])
      expectStatus(await a.delete(`/forms/${form.id}/integrations/${id}`), 200, 'delete');
  });
});

describe(`document merge emails over SMTP (${dialectName})`, () => {
  let smtp: SmtpSink;
  let app: TestApp;
  let a: TestAccount;

  before(async () => {
    smtp = await startSmtpSink();
    app = await startTestApp({ SMTP_URL: smtp.url, MAIL_FROM: 'Forms Desk <desk@forms.test>' });
    a = await app.account();
  });
  after(async () => {
    await app.close();
    await smtp.close();
  });

  it('sends the document as an attachment, once per job', async () => {
    const form = expectStatus(
      await a.post('/forms', { name: 'Mailed', fields: [{ type: 'text', label: 'Full name' }] }),
      200,
      'form',
    );
    const integration = expectStatus(
      await a.post(`/forms/${form.id}/integrations/docmerge`, {
        template: { filename: 'mailed.docx', content: b64(makeDocx(['Hello {Full name}'])) },
        fileName: 'Letter {submission_id}',
        email: { to: ['office@example.com', 'boss@example.com'], subject: 'Letter for {Full name}' },
      }),
      201,
      'create',
    );
    assert.ok(integration.id);
    const submission = expectStatus(
      await a.post(`/forms/${form.id}/submissions`, { fields: [{ id: form.fields[0].id, value: 'Mailed Mo' }] }),
      200,
      'submit',
    );
    const worker = createWorker(app.server.ctx, { kinds: jobKinds });
    await worker.runDue();
    await worker.runDue();
    for (let i = 0; i < 100 && smtp.messages.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(smtp.messages.length, 1);
    const [message] = smtp.messages;
    assert.deepEqual(message!.to.sort(), ['boss@example.com', 'office@example.com']);
    assert.match(message!.raw, /Subject: Letter for Mailed Mo/);
    // The attachment: its base64 part, decoded and opened.
    const part = message!.raw
      .split(/\r?\n--/)
      .find(
        (p) =>
          p.includes(`filename=Letter ${submission.id}.docx`) || p.includes(`filename="Letter ${submission.id}.docx"`),
      );
    assert.ok(part, message!.raw.slice(0, 2000));
    const body = part.slice(part.search(/\r?\n\r?\n/)).replace(/\s+/g, '');
    assert.equal(readDocx(Buffer.from(body, 'base64')).text, 'Hello Mailed Mo');
  });
});
