import { PDFDocument, StandardFonts, decodePDFRawStream, PDFRawStream } from 'pdf-lib';
import PizZip from 'pizzip';

/**
 * Templates made by the tests, and readers of what the service makes from them: a DOCX zipped
 * with pizzip (one paragraph per line), and a fillable PDF made with pdf-lib.
 */

const W = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main';

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A one-page DOCX whose paragraphs are the lines given (each may hold {merge tags}). */
export function makeDocx(lines: string[]): Buffer {
  const zip = new PizZip();
  zip.file(
    '[Content_Types].xml',
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>' +
      '<Default Extension="xml" ContentType="application/xml"/>' +
      '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>' +
      '</Types>',
  );
  zip.file(
    '_rels/.rels',
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
      '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>' +
      '</Relationships>',
  );
  const paragraphs = lines
    .map((line) => `<w:p><w:r><w:t xml:space="preserve">${escapeXml(line)}</w:t></w:r></w:p>`)
    .join('');
  zip.file(
    'word/document.xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="${W}"><w:body>${paragraphs}</w:body></w:document>`,
  );
  return zip.generate({ type: 'nodebuffer', compression: 'DEFLATE' });
}

/** The raw XML of a DOCX's body, and its text (paragraphs on lines, entities decoded). */
export function readDocx(bytes: Buffer): { xml: string; text: string } {
  const xml = new PizZip(bytes).file('word/document.xml')!.asText();
  const text = xml
    .replace(/<\/w:p>/g, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
  return { xml, text: text.trimEnd() };
}

/** A one-page PDF with a text field per name, a check box and a dropdown. */
export async function makePdf(options: {
  texts: string[];
  checkBox?: string;
  dropdown?: { name: string; options: string[] };
}) {
  const pdf = await PDFDocument.create();
  const page = pdf.addPage([600, 800]);
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  page.drawText('Certificate', { x: 50, y: 750, size: 24, font });
  const form = pdf.getForm();
  let y = 700;
  for (const name of options.texts) {
    form.createTextField(name).addToPage(page, { x: 50, y, width: 400, height: 24 });
    y -= 40;
  }
  if (options.checkBox) form.createCheckBox(options.checkBox).addToPage(page, { x: 50, y, width: 16, height: 16 });
  y -= 40;
  if (options.dropdown) {
    const dropdown = form.createDropdown(options.dropdown.name);
    dropdown.addOptions(options.dropdown.options);
    dropdown.addToPage(page, { x: 50, y, width: 200, height: 24 });
  }
  return Buffer.from(await pdf.save());
}

/** The form fields of a PDF that was not flattened: text by name, check boxes as 'checked'/'unchecked'. */
export async function readPdfFields(bytes: Buffer): Promise<Record<string, string>> {
  const pdf = await PDFDocument.load(bytes);
  const out: Record<string, string> = {};
  for (const field of pdf.getForm().getFields()) {
    const name = field.getName();
    const f = field as unknown as {
      getText?: () => string | undefined;
      isChecked?: () => boolean;
      getSelected?: () => string[];
    };
    if (f.getText) out[name] = f.getText() ?? '';
    else if (f.isChecked) out[name] = f.isChecked() ? 'checked' : 'unchecked';
    else if (f.getSelected) out[name] = f.getSelected().join(',');
  }
  return out;
}

/**
 * What a flattened PDF shows: the number of form fields left, and every content stream
 * decoded (the filled values are drawn there, as hex strings of their WinAnsi bytes).
 */
export async function readFlattenedPdf(bytes: Buffer): Promise<{ fields: number; streams: string }> {
  const pdf = await PDFDocument.load(bytes);
  const streams: string[] = [];
  for (const [, object] of pdf.context.enumerateIndirectObjects()) {
    if (!(object instanceof PDFRawStream)) continue;
    try {
      streams.push(Buffer.from(decodePDFRawStream(object).decode()).toString('latin1'));
    } catch {
      // an image or another stream of no text
    }
  }
  return { fields: pdf.getForm().getFields().length, streams: streams.join('\n') };
}

/** How pdf-lib draws a WinAnsi string in an appearance stream: <HEX> Tj. */
export function pdfHex(text: string): string {
  return Buffer.from(text, 'latin1').toString('hex').toUpperCase();
}
