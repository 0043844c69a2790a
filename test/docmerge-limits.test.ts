import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deflateSync } from 'node:zlib';
import PizZip from 'pizzip';
import type { AppContext } from '../src/context.js';
import type { Worker } from '../src/jobs/worker.js';
import { withDocmergeForm } from './support/docmerge-form.js';
import {
  MAX_DOCX_PART_BYTES,
  MAX_DOCX_UNPACKED_BYTES,
  MAX_DOCX_XML_BYTES,
  MAX_PDF_STREAM_BYTES,
} from '../src/modules/docmerge/template.js';
import { makeDocx, makePdf } from './support/docmerge-templates.js';
import { dialectName, dumpData, type Reply, type TestAccount, type TestApp, expectStatus } from './support/helpers.js';

/**
 * DOCX templates that unpack to more than the limits (zip bombs): refused before they are
 * inflated, at save, at a preview and at each document of a template kept before the limits;
 * and PDF templates with a stream that decodes to more than its limit, refused once it passes it.
 */

const MiB = 1024 * 1024;
const b64 = (bytes: Buffer) => bytes.toString('base64');

/** A valid one-paragraph DOCX with more parts added (or its document.xml replaced), deflated. */
function docxWith(parts: Record<string, Uint8Array>): Buffer {
  const zip = new PizZip(makeDocx(['Hello {Full name}']));
  for (const [name, bytes] of Object.entries(parts)) zip.file(name, bytes, { binary: true });
  return zip.generate({ type: 'nodebuffer', compression: 'DEFLATE' });
}

/** A document.xml that is valid XML of `size` bytes, nearly all of it one repeated letter. */
function bigDocumentXml(size: number): Uint8Array {
  const head = Buffer.from(
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">' +
      '<w:body><w:p><w:r><w:t>{Full name} ',
  );
  const tail = Buffer.from('</w:t></w:r></w:p></w:body></w:document>');
  const xml = Buffer.alloc(size, 'x');
  head.copy(xml, 0);
  tail.copy(xml, size - tail.length);
  return xml;
}

/** The zip with the uncompressed size of one entry rewritten (central directory and local header): a lie. */
function declareSize(zip: Buffer, name: string, size: number): Buffer {
  const out = Buffer.from(zip);
  let found = 0;
  for (let i = 0; i + 46 <= out.length; i++) {
    const signature = out.readUInt32LE(i);
    if (signature === 0x02014b50 && out.toString('latin1', i + 46, i + 46 + out.readUInt16LE(i + 28)) === name) {
      out.writeUInt32LE(size, i + 24);
      found++;
    } else if (signature === 0x04034b50 && out.toString('latin1', i + 30, i + 30 + out.readUInt16LE(i + 26)) === name) {
      out.writeUInt32LE(size, i + 22);
      found++;
    }
  }
  assert.equal(found, 2, `${name}: its local header and central directory entry`);
  return out;
}

let bombMade: Buffer | undefined;
/**
 * 16 MiB of one letter in word/document.xml (three times the limit of a part): about 16 KB
 * packed, inline well within BODY_LIMIT. Made once.
 */
function bomb(): Buffer {
  bombMade ??= docxWith({ 'word/document.xml': bigDocumentXml(16 * MiB) });
  return bombMade;
}

/**
 * A fillable PDF (a text field "Full name") with one more object appended: an object stream of
 * `size` deflated zeros, which pdf-lib decodes whole as it loads the file. Some 20 KB for 20 MiB.
 */
async function pdfWithObjectStream(size: number): Promise<Buffer> {
  const pdf = await makePdf({ texts: ['Full name'] });
  const stream = deflateSync(Buffer.alloc(size));
  return Buffer.concat([
    pdf,
    Buffer.from(
      `\n9999 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length ${stream.length} >>\nstream\n`,
    ),
    stream,
    Buffer.from('\nendstream\nendobj\n%%EOF\n'),
  ]);
}

describe(`document merge: templates that unpack too large (${dialectName})`, () => {
  let app: TestApp;
  let ctx: AppContext;
  let worker: Worker;
  let a: TestAccount;
  let formId: number;
  let nameField: number;

  withDocmergeForm('Bombs', (s) => ({ app, ctx, worker, a, formId, nameField } = s));

  const create = (template: Buffer) =>
    a.post(`/forms/${formId}/integrations/docmerge`, { template: { filename: 't.docx', content: b64(template) } });
  const refusal = (res: Reply) => {
    const body = expectStatus(res, 400, 'refused', 'invalid_integration');
    assert.equal(body.status, 'error');
    assert.equal(body.details.length, 1);
    assert.equal(body.details[0].property, 'body.template');
    return body.details[0].message as string;
  };

  it('refuses at save, writing nothing, a DOCX whose part, or all of whose parts, unpack over the limits', async () => {
    const before = await dumpData(app);

    assert.ok(bomb().length < 200_000, `the bomb is small packed: ${bomb().length}`);
    assert.equal(
      refusal(await create(bomb())),
      `t.docx is too large unpacked: its part word/document.xml unpacks to ${16 * MiB} bytes, ` +
        `over the limit of ${MAX_DOCX_PART_BYTES} bytes a part`,
    );

    // Five parts each under the limit of a part, over the limit of all of them together.
    const part = Math.floor(MAX_DOCX_UNPACKED_BYTES / 5) + 1;
    assert.ok(part <= MAX_DOCX_PART_BYTES);
    const media = Object.fromEntries([1, 2, 3, 4, 5].map((i) => [`word/media/pad${i}.bin`, new Uint8Array(part)]));
    assert.match(
      refusal(await create(docxWith(media))),
      new RegExp(
        `^t\\.docx is too large unpacked: its parts unpack to \\d+ bytes, over the limit of ${MAX_DOCX_UNPACKED_BYTES} bytes$`,
      ),
    );

    // Two XML parts each under the limit of a part, over the limit of XML together (parsed per document).
    const half = Math.floor(MAX_DOCX_XML_BYTES / 2) + 1;
    const xml = {
      'word/header1.xml': new Uint8Array(half).fill(32),
      'word/footer1.xml': new Uint8Array(half).fill(32),
    };
    assert.match(
      refusal(await create(docxWith(xml))),
      new RegExp(`its XML parts unpack to \\d+ bytes, over the limit of ${MAX_DOCX_XML_BYTES} bytes$`),
    );

    // The same bomb declaring 2,000 bytes: refused once that many are inflated, not after 16 MiB.
    assert.equal(
      refusal(await create(declareSize(bomb(), 'word/document.xml', 2000))),
      't.docx is not a DOCX file that can be read (its part word/document.xml unpacks to more than the 2000 bytes its zip declares)',
    );

    // Or declaring at least 2 GiB (which the zip library reads as negative).
    assert.match(
      refusal(await create(declareSize(bomb(), 'word/document.xml', 0x80000000))),
      /its part word\/document\.xml unpacks to at least 2 GiB, over the limit/,
    );

    assert.equal(await dumpData(app), before, 'a refused create writes nothing');

    // Within the limits: a part of 4 MiB beside the document is taken.
    expectStatus(await create(docxWith({ 'word/media/pad.bin': new Uint8Array(4 * MiB) })), 201, 'within the limits');
  });

  /**
   * A template kept by a version without a limit (written straight into its row): a submission's
   * document fails with `error`, and a preview of it is a 400. The submission is returned.
   */
  async function keptTemplateFails(integrationId: number, template: Buffer, error: RegExp) {
    await ctx.db
      .updateTable('docmerge_integrations')
      .set({ template: b64(template) })
      .where('id', '=', integrationId)
      .execute();
    const submission = expectStatus(
      await a.post(`/forms/${formId}/submissions`, { fields: [{ id: nameField, value: 'Bo' }] }),
      200,
      'submit',
    );
    await worker.runDue();
    const [run] = expectStatus(await a.get(`/forms/${formId}/integrations/${integrationId}/runs`), 200, 'runs').runs;
    assert.equal(run.outcome, 'failed');
    assert.match(run.error, error);
    const preview = await a.post(`/forms/${formId}/integrations/${integrationId}/preview`, {
      submissionId: submission.id,
    });
    assert.match(expectStatus(preview, 400, 'preview', 'invalid_integration').error, /too large unpacked/);
    return submission;
  }

  it('fails the documents and previews of a template kept before the limits, without inflating it', async () => {
    const created = expectStatus(await create(makeDocx(['Hello {Full name}'])), 201, 'create');
    // A bomb kept by a version without the limits.
    const submission = await keptTemplateFails(
      created.id,
      bomb(),
      /too large unpacked: its part word\/document\.xml unpacks to \d+ bytes/,
    );
    const record = expectStatus(await a.get(`/submissions/${submission.id}`), 200, 'submission');
    assert.equal(record.documents, undefined, 'no document made');
  });

  it('refuses a PDF with a stream that decodes over the limit, at save and preview, and fails its documents', async () => {
    const createPdf = (template: Buffer) =>
      a.post(`/forms/${formId}/integrations/docmerge`, { template: { filename: 't.pdf', content: b64(template) } });
    const before = await dumpData(app);
    const message = refusal(await createPdf(await pdfWithObjectStream(MAX_PDF_STREAM_BYTES + MiB)));
    assert.match(
      message,
      new RegExp(
        `^t\\.pdf is too large unpacked: a stream of it decodes to at least \\d+ bytes, over the limit of ${MAX_PDF_STREAM_BYTES} bytes a stream$`,
      ),
    );
    assert.equal(await dumpData(app), before, 'a refused create writes nothing');

    // A stream within the limit is read as pdf-lib reads it (its zeros hold no object: that one is skipped).
    const created = expectStatus(await createPdf(await pdfWithObjectStream(MiB)), 201, 'within the limit');
    assert.deepEqual(created.tags, ['Full name']);

    // A template kept before the limit: each document fails, and so does a preview, with a 400.
    await keptTemplateFails(
      created.id,
      await pdfWithObjectStream(MAX_PDF_STREAM_BYTES + MiB),
      /too large unpacked: a stream of it decodes to at least \d+ bytes/,
    );
  });
});
