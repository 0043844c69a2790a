import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PDFDocument, PDFName, StandardFonts } from 'pdf-lib';
import type { AppContext } from '../src/context.js';
import type { Worker } from '../src/jobs/worker.js';
import { withDocmergeForm } from './support/docmerge-form.js';
import { makeDocx, pdfHex, readDocx, readFlattenedPdf, readPdfFields } from './support/docmerge-templates.js';
import { dialectName, dumpData, type Reply, type TestAccount, type TestApp, expectStatus } from './support/helpers.js';

/**
 * What a person filling in a public form sends reaches the documents made from it, so a
 * template must never let a value decide the document's structure (a DOCX raw-XML tag `{@tag}`
 * inserted it unescaped), and a value the template's PDF cannot take (longer than a field's
 * maximum length) must not fail the document with a 500 or on every attempt.
 */

const b64 = (bytes: Buffer) => bytes.toString('base64');

/** Closes the paragraph and writes a hyperlink and an unclosed element, were it inserted as XML. */
const INJECTION = '</w:t></w:r></w:p><w:p><w:hyperlink r:id="rId99"><w:r><w:t>click</w:t></w:r></w:hyperlink><unclosed';

/** A DOCX body's text as a reader sees it: paragraphs and line breaks on lines of their own. */
function textOf(xml: string): string {
  return xml
    .replace(/<w:br\/>/g, '\n')
    .replace(/<\/w:p>/g, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&')
    .trimEnd();
}

/** A one-page PDF whose form is made by `build` (pdf-lib, as the service's author of a template would). */
async function pdfWith(build: (pdf: PDFDocument) => void): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const page = pdf.addPage([600, 800]);
  page.drawText('Badge', { x: 50, y: 750, size: 24, font: await pdf.embedFont(StandardFonts.Helvetica) });
  build(pdf);
  return Buffer.from(await pdf.save());
}

describe(`document merge of untrusted values (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let worker: Worker;
  let a: TestAccount;
  let formId: number;
  let nameField: number;

  withDocmergeForm('Badges', (s) => ({ app, ctx, worker, a, formId, nameField } = s));

  const create = (filename: string, template: Buffer, extra: Record<string, unknown> = {}) =>
    a.post(`/forms/${formId}/integrations/docmerge`, { template: { filename, content: b64(template) }, ...extra });
  const submit = async (name: string) =>
    expectStatus(
      await a.post(`/forms/${formId}/submissions`, { fields: [{ id: nameField, value: name }] }),
      200,
      'submit',
    );
  const runs = async (id: number) =>
    expectStatus(await a.get(`/forms/${formId}/integrations/${id}/runs`), 200, 'runs').runs as any[];
  /** The one document made for the submission, downloaded. */
  const madeDocument = async (submissionId: number) => {
    const [document] = expectStatus(await a.get(`/submissions/${submissionId}`), 200, 'submission').documents ?? [];
    assert.ok(document, 'a document was made');
    const res = await fetch(`${app.url}/api/v2025/submissions/${submissionId}/documents/${document.id}`, {
      headers: { authorization: `Bearer ${a.token}` },
    });
    assert.equal(res.status, 200);
    return Buffer.from(await res.arrayBuffer());
  };
  const preview = async (id: number, submissionId: number) => {
    const res = await fetch(`${app.url}/api/v2025/forms/${formId}/integrations/${id}/preview`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ submissionId }),
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    return { status: res.status, bytes, json: () => JSON.parse(bytes.toString('utf8')) as any };
  };

  it('refuses a DOCX with a raw-XML tag at create, update and preview, naming the tag', async () => {
    const refusal = (res: Reply) => {
      const body = expectStatus(res, 400, 'refused', 'invalid_integration');
      return (body.details as any[]).map((d) => [d.property, d.message]);
    };
    const written = 'values are merged as text, never as XML';
    const before = await dumpData(app);
    assert.deepEqual(refusal(await create('t.docx', makeDocx(['{@Full name}']))), [
      ['body.template', `t.docx has a raw XML tag {@Full name}: ${written} (write {Full name})`],
    ]);
    // Beside other text (which docxtemplater would not place), inside a loop, several.
    assert.deepEqual(refusal(await create('t.docx', makeDocx(['Dear {@Full name},']))), [
      ['body.template', `t.docx has a raw XML tag {@Full name}: ${written} (write {Full name})`],
    ]);
    assert.deepEqual(
      refusal(await create('t.docx', makeDocx(['{Full name}', '{#Full name}', '{@value}', '{/Full name}', '{@Note}']))),
      [['body.template', `t.docx has raw XML tags {@value}, {@Note}: ${written} (write {value}, {Note})`]],
    );
    assert.equal(await dumpData(app), before, 'a refused create writes nothing');

    const created = expectStatus(await create('ok.docx', makeDocx(['Hello {Full name}'])), 201, 'create');
    const submission = await submit('Pat');
    const kept = await dumpData(app);
    assert.deepEqual(
      refusal(
        await a.put(`/forms/${formId}/integrations/${created.id}`, {
          template: { filename: 'new.docx', content: b64(makeDocx(['{@Full name}'])) },
        }),
      ),
      [['body.template', `new.docx has a raw XML tag {@Full name}: ${written} (write {Full name})`]],
    );
    const tried = await a.post(`/forms/${formId}/integrations/${created.id}/preview`, {
      submissionId: submission.id,
      template: { filename: 'next.docx', content: b64(makeDocx(['{@Full name}'])) },
    });
    assert.deepEqual(refusal(tried), [
      ['body.template', `next.docx has a raw XML tag {@Full name}: ${written} (write {Full name})`],
    ]);
    assert.equal(await dumpData(app), kept, 'a refused update or preview changes nothing');
  });

  it("reads a loop item's own values only, not what its prototype has", async () => {
    const created = expectStatus(
      await create('proto.docx', makeDocx(['{#Full name}[{constructor}|{toString}|{__proto__}|{value}]{/Full name}'])),
      201,
      'create',
    );
    const submission = await submit('Pat');
    const shown = await preview(created.id, submission.id);
    assert.equal(readDocx(shown.bytes).text, '[|||Pat]');
  });

  it('merges the raw-XML tags of a template kept before they were refused as escaped text, never as XML', async () => {
    const created = expectStatus(await create('kept.docx', makeDocx(['{Full name}'])), 201, 'create');
    // Kept by a version that took raw tags: one alone in its paragraph, one in a loop over the value.
    const kept = makeDocx(['Before', '{@Full name}', 'Between', '{#Full name}', '{@value}', '{/Full name}', 'After']);
    await ctx.db
      .updateTable('docmerge_integrations')
      .set({ template: b64(kept) })
      .where('id', '=', created.id)
      .execute();
    const value = `${INJECTION}\nsecond line & "more"`;
    const submission = await submit(value);
    await worker.runDue();
    assert.deepEqual(
      (await runs(created.id)).map((r) => r.outcome),
      ['made'],
    );
    const lines = ['Before', value, 'Between', value, 'After'];
    for (const bytes of [await madeDocument(submission.id), (await preview(created.id, submission.id)).bytes]) {
      const { xml } = readDocx(bytes);
      assert.ok(!xml.includes('<unclosed') && !xml.includes('<w:hyperlink'), `no XML of the value: ${xml}`);
      assert.ok(xml.includes('&lt;unclosed'), 'the value is there, escaped');
      // A paragraph of the value's text, its lines broken as other tags' values are.
      assert.equal(textOf(xml), lines.join('\n'));
      assert.equal((xml.match(/<w:p>/g) ?? []).length, (xml.match(/<\/w:p>/g) ?? []).length);
      assert.equal((xml.match(/<w:br\/>/g) ?? []).length, 2);
    }
  });

  it("cuts a value to a PDF text field's maximum length, by character, in the document and the preview", async () => {
    const template = await pdfWith((pdf) => {
      const form = pdf.getForm();
      const short = form.createTextField('Full name');
      short.setMaxLength(5);
      short.addToPage(pdf.getPage(0), { x: 50, y: 700, width: 300, height: 24 });
    });
    const fillable = expectStatus(await create('badge.pdf', template, { flatten: false }), 201, 'fillable');
    const submission = await submit('Zoë Mustermann');
    await worker.runDue();
    assert.deepEqual(
      (await runs(fillable.id)).map((r) => [r.outcome, r.error]),
      [['made', null]],
    );
    assert.deepEqual(await readPdfFields(await madeDocument(submission.id)), { 'Full name': 'Zoë M' });

    const flat = expectStatus(await create('badge.pdf', template, { active: false }), 201, 'flattened');
    const shown = await preview(flat.id, submission.id);
    assert.equal(shown.status, 200, shown.bytes.toString('utf8').slice(0, 300));
    const pdf = await readFlattenedPdf(shown.bytes);
    assert.equal(pdf.fields, 0);
    assert.ok(pdf.streams.includes(`<${pdfHex('Zoë M')}>`), 'the cut value is drawn into the page');
    assert.ok(!pdf.streams.includes(pdfHex('Zoë Mu')));

    // Characters outside the BMP count one each: five of them fill the field, each shown as one '?'.
    const wide = await submit('😀😀😀😀😀😀😀');
    const fields = await readPdfFields((await preview(fillable.id, wide.id)).bytes);
    assert.deepEqual(fields, { 'Full name': '?????' });
  });

  it("fails a PDF field pdf-lib cannot draw as the template's problem, naming the field: 400 on preview, a failed run", async () => {
    // A widget on no page (a damaged template): pdf-lib cannot flatten it.
    const template = await pdfWith((pdf) => {
      const field = pdf.getForm().createTextField('Full name');
      field.addToPage(pdf.getPage(0), { x: 50, y: 700, width: 300, height: 24 });
      const [widget] = field.acroField.getWidgets();
      pdf.getPage(0).node.removeAnnot(pdf.context.getObjectRef(widget!.dict)!);
      widget!.dict.delete(PDFName.of('P'));
    });
    const created = expectStatus(await create('damaged.pdf', template), 201, 'create');
    const submission = await submit('Pat');
    const shown = await preview(created.id, submission.id);
    assert.equal(shown.status, 400, shown.bytes.toString('utf8').slice(0, 300));
    const body = shown.json();
    assert.equal(body.code, 'invalid_integration');
    assert.match(body.error, /^The template could not be merged: its field "Full name" could not be flattened \(/);
    await worker.runDue();
    const [run] = await runs(created.id);
    assert.equal(run.outcome, 'failed');
    assert.match(run.error, /^could not be merged: its field "Full name" could not be flattened \(/);
    assert.ok(run.nextAttempt, 'retried on the schedule, like any template that cannot be merged');
  });
});
