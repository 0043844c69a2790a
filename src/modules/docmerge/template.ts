import { AsyncLocalStorage } from 'node:async_hooks';
import { inflateRawSync } from 'node:zlib';
import type Docxtemplater from 'docxtemplater';
import type InspectModuleExport from 'docxtemplater/js/inspect-module.js';
import type * as PdfLib from 'pdf-lib';
import type { PDFDocument, PDFField, PDFFont, PDFForm } from 'pdf-lib';
import type PizZip from 'pizzip';
import { lazyRequire } from '../../lazy-require.js';
import { MAX_TEMPLATE_BYTES } from './schemas.js';
import { cutToCharacters } from '../../http/characters.js';

/**
 * Templates of document-merge integrations, with no database and no storage: reading a
 * template's tags (DOCX merge tags, or the form fields of a fillable PDF) and merging values
 * into it. DOCX goes through docxtemplater (which escapes every value for XML; its raw-XML tags
 * `{@tag}` are refused at save and merged as text), PDF through pdf-lib (each field filled, then
 * the form flattened into the page).
 */

export type TemplateKind = 'docx' | 'pdf';

// Loaded with the first template: only forms with a document-merge integration need them.
const loadDocxtemplater = lazyRequire<typeof Docxtemplater>('docxtemplater');
const loadPizZip = lazyRequire<typeof PizZip>('pizzip');
const loadPdfLib = lazyRequire<typeof PdfLib>('pdf-lib');
const loadDecodeStream = lazyRequire<{ default?: { prototype?: Partial<DecodeStreamPrototype> } }>(
  'pdf-lib/cjs/core/streams/DecodeStream.js',
);
const loadInspectModuleExport = lazyRequire<typeof InspectModuleExport>('docxtemplater/js/inspect-module.js');

type InspectModule = InstanceType<typeof InspectModuleExport.default>;

function newInspectModule(): InspectModule {
  // CommonJS: module.exports is the class itself; the typings describe it as a default export.
  const exported = loadInspectModuleExport();
  const InspectModule = ((exported as unknown as { default?: unknown }).default ?? exported) as new () => InspectModule;
  return new InspectModule();
}

export const CONTENT_TYPES: Record<TemplateKind, string> = {
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  pdf: 'application/pdf',
};

/** A template that cannot be read: why, for a person. */
export class TemplateError extends Error {}

/**
 * What a tag stands for when merged: its text, and the items a DOCX loop over it repeats
 * (the options of a checkbox field, the files of a file field, the rows of a matrix; a
 * single value is one item, an empty one none, so a loop also serves as a condition).
 */
export class MergeValue {
  constructor(
    readonly text: string,
    readonly items: Record<string, string | number>[],
  ) {}
}

/** Values by tag (or PDF field name); a tag missing here merges as empty. */
export type MergeData = Map<string, MergeValue>;

/** What a tag that MergeData does not hold merges (tags inside DOCX loops are not listed ahead). */
export type MergeFallback = (tag: string) => MergeValue | undefined;

/** The outermost scope of a DOCX merge: the values, then the fallback. */
class RootScope {
  constructor(
    readonly data: MergeData,
    readonly fallback: MergeFallback | undefined,
  ) {}
  get(tag: string): MergeValue | undefined {
    return this.data.get(tag) ?? this.fallback?.(tag);
  }
}

export function kindOf(bytes: Buffer): TemplateKind | undefined {
  if (bytes.subarray(0, 5).toString('latin1') === '%PDF-') return 'pdf';
  if (bytes.subarray(0, 4).equals(Buffer.from([0x50, 0x4b, 0x03, 0x04]))) return 'docx';
  return undefined;
}

function explain(error: unknown): string {
  const e = error as { message?: string; properties?: { errors?: { properties?: { explanation?: string } }[] } };
  const explanations = (e.properties?.errors ?? []).map((x) => x.properties?.explanation).filter(Boolean);
  if (explanations.length > 0) return explanations.join('; ');
  return e.message ?? String(error);
}

/**
 * What a DOCX template may unpack to. A zip is small and can unpack to far more (a 292 KB
 * template to 300 MB of XML), which docxtemplater inflates, holds and parses (in the merge
 * thread, threaded-merge.ts) at save and again for every document. A template is at most
 * MAX_TEMPLATE_BYTES packed; its images and fonts, most of a large template's bytes, barely
 * compress, and 5 MiB of a part's XML is some hundreds of pages (and already seconds of merging
 * per document). So no part may unpack to more than MAX_TEMPLATE_BYTES, nor all of them to more
 * than four times that.
 */
export const MAX_DOCX_PART_BYTES = MAX_TEMPLATE_BYTES;
export const MAX_DOCX_UNPACKED_BYTES = 4 * MAX_TEMPLATE_BYTES;
/** Of which XML, which docxtemplater parses for each document: more would be seconds of CPU a document. */
export const MAX_DOCX_XML_BYTES = MAX_TEMPLATE_BYTES;

/**
 * What pizzip (pinned at 3.3.0) keeps of an entry it has read from the zip's central directory,
 * still packed: `new PizZip(bytes)` inflates nothing, a part is inflated when first read.
 */
interface PackedPart {
  compressionMethod: string; // '\x08\x00' DEFLATE, '\x00\x00' STORE (pizzip refuses any other)
  uncompressedSize: number; // as declared; pizzip reads 2 GiB and more as negative
  getCompressedContent(): unknown;
}

const DEFLATE = '\x08\x00';

/**
 * Throws TemplateError when a part of the zip, or all of them, would unpack to more than the
 * limits, before anything is inflated: first the sizes the zip declares, then each deflated part
 * inflated once here with its output cut at its declared size (a zip that understates a part's
 * size is refused after that many bytes, not after inflating the whole of it, as pizzip would).
 */
function checkUnpackedSize(zip: PizZip): void {
  const parts = Object.values(zip.files).flatMap((file) => {
    const packed = (file as unknown as { _data: Partial<PackedPart> | null })._data;
    if (packed === null) return []; // a directory: pizzip keeps no content for it
    if (typeof packed.uncompressedSize !== 'number' || typeof packed.getCompressedContent !== 'function')
      throw new Error(`pizzip no longer exposes the declared size of ${file.name} (checkUnpackedSize needs it)`);
    return [{ name: file.name, packed: packed as PackedPart }];
  });
  let total = 0;
  let xml = 0;
  for (const { name, packed } of parts) {
    const size = packed.uncompressedSize;
    if (!(size >= 0 && size <= MAX_DOCX_PART_BYTES))
      throw new TemplateError(
        `is too large unpacked: its part ${name} unpacks to ${size < 0 ? 'at least 2 GiB' : `${size} bytes`}, ` +
          `over the limit of ${MAX_DOCX_PART_BYTES} bytes a part`,
      );
    total += size;
    if (/\.(xml|rels)$/i.test(name)) xml += size;
  }
  if (xml > MAX_DOCX_XML_BYTES)
    throw new TemplateError(
      `is too large unpacked: its XML parts unpack to ${xml} bytes, over the limit of ${MAX_DOCX_XML_BYTES} bytes`,
    );
  if (total > MAX_DOCX_UNPACKED_BYTES)
    throw new TemplateError(
      `is too large unpacked: its parts unpack to ${total} bytes, over the limit of ${MAX_DOCX_UNPACKED_BYTES} bytes`,
    );
  for (const { name, packed } of parts) {
    if (packed.compressionMethod !== DEFLATE) continue; // STORE: its bytes are its packed bytes
    const size = packed.uncompressedSize;
    let inflated: Buffer;
    try {
      // Throws ERR_BUFFER_TOO_LARGE as soon as the output passes the limit (which must be at least 1).
      inflated = inflateRawSync(packed.getCompressedContent() as Uint8Array, { maxOutputLength: Math.max(size, 1) });
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
        throw new TemplateError(
          `is not a DOCX file that can be read (its part ${name} unpacks to more than the ${size} bytes its zip declares)`,
        );
      throw new TemplateError(
        `is not a DOCX file that can be read (its part ${name} cannot be unpacked: ${explain(error)})`,
      );
    }
    if (inflated.length !== size)
      throw new TemplateError(
        `is not a DOCX file that can be read (its part ${name} unpacks to ${inflated.length} bytes, not the ${size} its zip declares)`,
      );
  }
}

/**
 * docxtemplater's rawxml module inserts the value of `{@tag}` into the XML unescaped: from a
 * public form, anyone could write hyperlinks, field codes, external images or broken XML into the
 * documents. Such tags are refused when a template is saved (templateTags); a template kept before
 * that merges each as a paragraph of the value's text, escaped (rawParagraph).
 */
const RAW_MODULE = 'rawxml';
/** docxtemplater's refusals of a raw tag it cannot place (not alone in its paragraph, in an inline loop). */
const RAW_TAG_ERRORS = new Set(['raw_xml_tag_should_be_only_text_in_paragraph', 'raw_tag_outerxml_invalid']);

function rawTagsRefused(names: string[]): TemplateError {
  const tags = [...new Set(names)];
  return new TemplateError(
    `has ${tags.length === 1 ? 'a raw XML tag' : 'raw XML tags'} ${tags.map((t) => `{@${t}}`).join(', ')}: ` +
      `values are merged as text, never as XML (write ${tags.map((t) => `{${t}}`).join(', ')})`,
  );
}

/** The raw tags docxtemplater refused to compile, as their names, or none. */
function rawTagsIn(error: unknown): string[] {
  const e = error as { properties?: { id?: string; xtag?: string; errors?: unknown[] } };
  const errors = (e.properties?.errors ?? [error]) as { properties?: { id?: string; xtag?: string } }[];
  return errors
    .filter((x) => RAW_TAG_ERRORS.has(x.properties?.id ?? '') && typeof x.properties?.xtag === 'string')
    .map((x) => x.properties!.xtag!);
}

/** The raw tags of a parsed template, loops included. */
function rawTagsOf(parts: Docxtemplater.DXT.Part[]): string[] {
  return parts.flatMap((p) => [...(p.module === RAW_MODULE ? [p.value] : []), ...rawTagsOf(p.subparsed ?? [])]);
}

// Characters XML 1.0 does not allow: in a value they would make the document unreadable.
const NOT_XML = /[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/gu;

function escapeXml(text: string): string {
  return text
    .replace(NOT_XML, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/**
 * What a raw tag of a template kept from before they were refused merges: the rawxml module
 * replaces the tag's whole paragraph with the value, so the value goes in as a paragraph of its
 * text, escaped, its lines broken as other tags' are. An empty value removes the paragraph, as
 * it did.
 */
function rawParagraph(value: unknown): string {
  const text =
    value instanceof MergeValue
      ? value.text
      : typeof value === 'string' || typeof value === 'number'
        ? String(value)
        : '';
  if (text === '') return '';
  const lines = text.split(/\r?\n/).map((line) => `<w:t xml:space="preserve">${escapeXml(line)}</w:t>`);
  return `<w:p><w:r>${lines.join('<w:br/>')}</w:r></w:p>`;
}

function openDocx(bytes: Buffer, modules: Docxtemplater.DXT.Module[] = []): Docxtemplater {
  let zip: PizZip;
  try {
    zip = new (loadPizZip())(bytes);
  } catch (error) {
    throw new TemplateError(`is not a DOCX file (${explain(error)})`);
  }
  checkUnpackedSize(zip);
  if (!zip.file('word/document.xml')) throw new TemplateError('is not a DOCX file (it has no word/document.xml)');
  try {
    return new (loadDocxtemplater())(zip, {
      paragraphLoop: true,
      linebreaks: true,
      errorLogging: false,
      modules,
      nullGetter: () => '',
      parser: (tag: string) => {
        const name = tag.trim();
        return {
          get(scope: unknown, context: { meta?: { part?: { module?: string } } }) {
            const module = context?.meta?.part?.module;
            const value =
              name === '.'
                ? scope
                : scope instanceof RootScope
                  ? scope.get(name)
                  : // A loop's item by its own keys only: {constructor} or {toString} named its prototype's.
                    typeof scope === 'object' && scope !== null && Object.hasOwn(scope, name)
                    ? (scope as Record<string, unknown>)[name]
                    : undefined;
            // Left undefined, docxtemplater looks in the enclosing scopes.
            if (module === RAW_MODULE) return value === undefined || value === null ? value : rawParagraph(value);
            if (name === '.') return value;
            if (value instanceof MergeValue) return module === 'loop' ? value.items : value.text;
            return value;
          },
        };
      },
    } as Docxtemplater.DXT.ConstructorOptions);
  } catch (error) {
    const raw = rawTagsIn(error);
    if (raw.length > 0) throw rawTagsRefused(raw);
    throw new TemplateError(`has broken merge tags: ${explain(error)}`);
  }
}

/**
 * What one stream of a PDF may decode to. pdf-lib decodes a PDF's object streams and
 * cross-reference streams as it loads the template (at save, and again for every document), each
 * whole into one buffer that it doubles as it grows, with no bound: a template of 5 MiB (by
 * fileKey) of deflated zeros decodes to 5 GB, in ArrayBuffers that the merge thread's heap limit
 * does not count (one such template took the process to 6.4 GB of memory). A template's own
 * streams are far smaller (object streams hold some hundred objects each). So no stream may
 * decode to more than four times the largest template (the bound of a DOCX's parts together);
 * what decoding many streams within it costs in CPU is bounded by the merge's time limit.
 */
export const MAX_PDF_STREAM_BYTES = 4 * MAX_TEMPLATE_BYTES;

/**
 * What this code relies on of pdf-lib (pinned at 1.17.1): every filter's stream (DecodeStream)
 * grows its buffer through ensureBuffer, to the first power of two from minBufferLength that
 * holds what is asked for, and writes up to the length of the buffer it answers before asking again.
 */
interface DecodeStreamPrototype {
  buffer: Uint8Array;
  minBufferLength: number;
  ensureBuffer(requested: number): Uint8Array;
}

/**
 * The loads under way in this thread: a stream over the limit throws inside pdf-lib's parser,
 * which catches any error of an object it parses and carries on without that object, so the
 * refusal is also noted here, for openPdf to refuse the template rather than load what is left.
 */
const pdfLoads = new AsyncLocalStorage<{ refused?: number }>();
let streamsBounded = false;

/**
 * pdf-lib, its decoding streams bounded by MAX_PDF_STREAM_BYTES (done once, when it is first
 * loaded): ensureBuffer as pdf-lib's, but its buffer never larger than the limit (a doubling
 * would otherwise allocate up to twice the limit, and write that far before asking again), and
 * a request past the limit refused.
 */
function pdfLib(): typeof PdfLib {
  const lib = loadPdfLib();
  if (streamsBounded) return lib;
  const prototype = loadDecodeStream().default?.prototype;
  if (typeof prototype?.ensureBuffer !== 'function')
    throw new Error('pdf-lib no longer has DecodeStream.prototype.ensureBuffer (MAX_PDF_STREAM_BYTES needs it)');
  prototype.ensureBuffer = function (this: DecodeStreamPrototype, requested: number): Uint8Array {
    const buffer = this.buffer;
    if (requested <= buffer.byteLength) return buffer;
    if (requested > MAX_PDF_STREAM_BYTES) {
      const load = pdfLoads.getStore();
      if (load) load.refused = requested;
      throw new TemplateError(streamTooLarge(requested));
    }
    let size = this.minBufferLength;
    while (size < requested) size *= 2;
    const grown = new Uint8Array(Math.min(size, MAX_PDF_STREAM_BYTES));
    grown.set(buffer);
    return (this.buffer = grown);
  };
  streamsBounded = true;
  return lib;
}

const streamTooLarge = (requested: number) =>
  `is too large unpacked: a stream of it decodes to at least ${requested} bytes, over the limit of ${MAX_PDF_STREAM_BYTES} bytes a stream`;

async function openPdf(bytes: Buffer): Promise<PDFDocument> {
  const { PDFDocument } = pdfLib();
  const load: { refused?: number } = {};
  let pdf: PDFDocument | undefined;
  let failure: unknown;
  try {
    pdf = await pdfLoads.run(load, () => PDFDocument.load(bytes, { updateMetadata: false }));
  } catch (error) {
    failure = error;
  }
  // A stream over the limit is the reason, whatever pdf-lib made of the rest.
  if (load.refused !== undefined) throw new TemplateError(streamTooLarge(load.refused));
  if (!pdf) throw new TemplateError(`is not a PDF file that can be read (${explain(failure)})`);
  return pdf;
}

/**
 * The names a template merges: a DOCX's top-level tags (loop names included; the tags inside
 * a loop name properties of its items), or a PDF's form field names. Throws TemplateError, for
 * a DOCX with a raw-XML tag `{@tag}` too.
 */
export async function templateTags(kind: TemplateKind, bytes: Buffer): Promise<string[]> {
  if (kind === 'docx') {
    const inspect = newInspectModule();
    openDocx(bytes, [inspect]);
    const raw = rawTagsOf(inspect.getAllStructuredTags());
    if (raw.length > 0) throw rawTagsRefused(raw);
    return Object.keys(inspect.getAllTags()).map((t) => t.trim());
  }
  const pdf = await openPdf(bytes);
  let names: string[];
  try {
    names = pdf
      .getForm()
      .getFields()
      .map((f) => f.getName());
  } catch (error) {
    throw new TemplateError(`has a form that cannot be read (${explain(error)})`);
  }
  if (names.length === 0) throw new TemplateError('is a PDF without form fields: there is nothing to fill');
  return names;
}

function mergeDocx(bytes: Buffer, data: MergeData, fallback: MergeFallback | undefined): Buffer {
  const doc = openDocx(bytes);
  try {
    doc.render(new RootScope(data, fallback));
  } catch (error) {
    throw new TemplateError(`could not be merged: ${explain(error)}`);
  }
  return doc.getZip().generate({ type: 'nodebuffer', compression: 'DEFLATE' });
}

// The standard fonts of a PDF encode WinAnsi only; other characters are shown as '?' (one for a
// character outside the BMP too, not one per UTF-16 unit: hence the u flag).
const WIN_ANSI = /[^\u0020-\u007e\u00a0-\u00ff\u2013\u2014\u2018\u2019\u201c\u201d\u2022\u2026\u20ac\n]/gu;

const FALSE_WORDS = new Set(['', '0', 'no', 'false', 'off']);

/**
 * The text cut to a field's maximum length, if it has one: pdf-lib refuses longer text (and a
 * person filling the PDF in could not type more). Cut by code point, so that no character is
 * split in half; after WIN_ANSI every character is one UTF-16 unit, the unit pdf-lib counts.
 */
function fitted(text: string, maxLength: number | undefined): string {
  if (maxLength === undefined) return text;
  const characters = Array.from(text);
  return characters.length <= maxLength ? text : characters.slice(0, Math.max(maxLength, 0)).join('');
}

/**
 * Runs what pdf-lib does to one field: a template's field can still be one pdf-lib refuses to fill
 * or draw (a value it will not take, an appearance it cannot make), and that is the template's
 * problem, told as one (a 400 on preview, a failed run), not an error of the service.
 */
function onField(name: string, doing: string, work: () => void): void {
  try {
    work();
  } catch (error) {
    throw new TemplateError(`could not be merged: its field "${name}" could not be ${doing} (${explain(error)})`);
  }
}

async function mergePdf(bytes: Buffer, data: MergeData, flatten: boolean): Promise<Buffer> {
  const { PDFCheckBox, PDFDropdown, PDFOptionList, PDFRadioGroup, PDFTextField } = pdfLib();
  const pdf = await openPdf(bytes);
  let form: PDFForm;
  let fields: { field: PDFField; name: string }[];
  try {
    form = pdf.getForm();
    fields = form.getFields().map((field) => ({ field, name: field.getName() }));
  } catch (error) {
    throw new TemplateError(`has a form that cannot be read (${explain(error)})`);
  }
  for (const { field, name } of fields) {
    const value = data.get(name);
    if (!value) continue;
    const text = value.text.replace(WIN_ANSI, '?');
    onField(name, 'filled', () => {
      if (field instanceof PDFTextField) {
        field.setText(fitted(text, field.getMaxLength()));
      } else if (field instanceof PDFCheckBox) {
        if (FALSE_WORDS.has(value.text.trim().toLowerCase())) field.uncheck();
        else field.check();
      } else if (field instanceof PDFRadioGroup || field instanceof PDFDropdown || field instanceof PDFOptionList) {
        const options = field.getOptions();
        // An option matches an item's option value or its label, ignoring case.
        const byName = new Map(options.map((o) => [o.toLowerCase(), o]));
        const wanted = [
          ...new Set(
            value.items
              .map((i) =>
                [i.option, i.value].map((v) => (v === undefined ? undefined : byName.get(String(v).toLowerCase()))),
              )
              .map(([option, label]) => option ?? label)
              .filter((o): o is string => o !== undefined),
          ),
        ];
        if (field instanceof PDFRadioGroup) {
          if (wanted[0] !== undefined) field.select(wanted[0]);
        } else if (wanted.length > 0) {
          field.select(field instanceof PDFOptionList ? wanted : wanted[0]!);
        } else if (field instanceof PDFDropdown && field.isEditable() && text !== '') {
          field.select(text);
        }
      }
    });
  }
  // What form.updateFieldAppearances does, one field at a time, so that a failure names its field.
  let font: PDFFont;
  try {
    font = form.getDefaultFont();
  } catch (error) {
    throw new TemplateError(`could not be merged: its fields' font could not be embedded (${explain(error)})`);
  }
  for (const { field, name } of fields)
    onField(name, 'drawn', () => {
      if (field.needsAppearancesUpdate()) field.defaultUpdateAppearances(font);
    });
  if (flatten) {
    try {
      form.flatten({ updateFieldAppearances: false });
    } catch (error) {
      // flatten draws the fields in order and removes each once drawn: the first left is the one that failed.
      let failed: string | undefined;
      try {
        failed = form.getFields()[0]?.getName();
      } catch {
        // the form is past reading: the message names no field
      }
      throw new TemplateError(
        failed === undefined
          ? `could not be merged: its form could not be flattened (${explain(error)})`
          : `could not be merged: its field "${failed}" could not be flattened (${explain(error)})`,
      );
    }
  }
  try {
    return Buffer.from(await pdf.save());
  } catch (error) {
    throw new TemplateError(`could not be merged: the filled PDF could not be written (${explain(error)})`);
  }
}

/** The template with the values merged in; throws TemplateError. */
export async function merge(
  kind: TemplateKind,
  bytes: Buffer,
  data: MergeData,
  options: { flatten: boolean; fallback?: MergeFallback } = { flatten: true },
): Promise<Buffer> {
  return kind === 'docx' ? mergeDocx(bytes, data, options.fallback) : mergePdf(bytes, data, options.flatten);
}

/** The tags of a file-name pattern or subject: `{tag}`. */
export function patternTags(pattern: string): string[] {
  return [...pattern.matchAll(/\{([^{}]+)\}/g)].map((m) => m[1]!.trim());
}

export function fillPattern(pattern: string, data: MergeData): string {
  return pattern.replace(/\{([^{}]+)\}/g, (_, tag: string) => data.get(tag.trim())?.text ?? '');
}

/** A file name from a pattern: no path separators or control characters, at most 200 characters, with the extension. */
export function fileNameOf(pattern: string, data: MergeData, kind: TemplateKind): string {
  // eslint-disable-next-line no-control-regex
  let name = fillPattern(pattern, data).replace(/[\u0000-\u001f\u007f/\\:*?"<>|]+/g, ' ');
  name = cutToCharacters(name.replace(/\s+/g, ' ').trim(), 200).trim();
  const ext = `.${kind}`;
  if (name.toLowerCase().endsWith(ext)) name = name.slice(0, -ext.length).trim();
  return `${name || 'document'}${ext}`;
}
