import { inflateRawSync } from 'node:zlib';
import type Docxtemplater from 'docxtemplater';
import type InspectModuleExport from 'docxtemplater/js/inspect-module.js';
import type * as PdfLib from 'pdf-lib';
import type { PDFDocument } from 'pdf-lib';
import type PizZip from 'pizzip';
import { lazyRequire } from '../../lazy-require.js';
import { MAX_TEMPLATE_BYTES } from './schemas.js';

/**
 * Templates of document-merge integrations, with no database and no storage: reading a
 * template's tags (DOCX merge tags, or the form fields of a fillable PDF) and merging values
 * into it. DOCX goes through docxtemplater (which escapes every value for XML), PDF through
 * pdf-lib (each field filled, then the form flattened into the page).
 */

export type TemplateKind = 'docx' | 'pdf';

// Loaded with the first template: only forms with a document-merge integration need them.
const loadDocxtemplater = lazyRequire<typeof Docxtemplater>('docxtemplater');
const loadPizZip = lazyRequire<typeof PizZip>('pizzip');
const loadPdfLib = lazyRequire<typeof PdfLib>('pdf-lib');
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
            if (name === '.') return scope;
            const value =
              scope instanceof RootScope
                ? scope.get(name)
                : typeof scope === 'object' && scope !== null
                  ? (scope as Record<string, unknown>)[name]
                  : undefined;
            if (value instanceof MergeValue) return context?.meta?.part?.module === 'loop' ? value.items : value.text;
            return value;
          },
        };
      },
    } as Docxtemplater.DXT.ConstructorOptions);
  } catch (error) {
    throw new TemplateError(`has broken merge tags: ${explain(error)}`);
  }
}

async function openPdf(bytes: Buffer): Promise<PDFDocument> {
  try {
    return await loadPdfLib().PDFDocument.load(bytes, { updateMetadata: false });
  } catch (error) {
    throw new TemplateError(`is not a PDF file that can be read (${explain(error)})`);
  }
}

/**
 * The names a template merges: a DOCX's top-level tags (loop names included; the tags inside
 * a loop name properties of its items), or a PDF's form field names. Throws TemplateError.
 */
export async function templateTags(kind: TemplateKind, bytes: Buffer): Promise<string[]> {
  if (kind === 'docx') {
    const inspect = newInspectModule();
    openDocx(bytes, [inspect]);
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

// The standard fonts of a PDF encode WinAnsi only; other characters are shown as '?'.
const WIN_ANSI = /[^\u0020-\u007e\u00a0-\u00ff\u2013\u2014\u2018\u2019\u201c\u201d\u2022\u2026\u20ac\n]/g;

const FALSE_WORDS = new Set(['', '0', 'no', 'false', 'off']);

async function mergePdf(bytes: Buffer, data: MergeData, flatten: boolean): Promise<Buffer> {
  const { PDFCheckBox, PDFDropdown, PDFOptionList, PDFRadioGroup, PDFTextField } = loadPdfLib();
  const pdf = await openPdf(bytes);
  const form = pdf.getForm();
  for (const field of form.getFields()) {
    const value = data.get(field.getName());
    if (!value) continue;
    const text = value.text.replace(WIN_ANSI, '?');
    if (field instanceof PDFTextField) {
      field.setText(text);
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
  }
  if (flatten) form.flatten();
  else form.updateFieldAppearances();
  return Buffer.from(await pdf.save());
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
  name = name.replace(/\s+/g, ' ').trim().slice(0, 200).trim();
  const ext = `.${kind}`;
  if (name.toLowerCase().endsWith(ext)) name = name.slice(0, -ext.length).trim();
  return `${name || 'document'}${ext}`;
}
