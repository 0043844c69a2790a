import { randomBytes } from 'node:crypto';
import { DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_FILES } from '../fields/types.js';
import type { FieldForValues } from '../submissions/values.js';

/** Upload URLs live 2 hours (the spec's presigned URL lifetime); unclaimed uploads go after that. */
export const UPLOAD_URL_TTL_MS = 2 * 60 * 60 * 1000;
export const SIGNATURE_MAX_FILE_SIZE = 1024 * 1024;
/**
 * The longest file name, in characters (Unicode code points, not UTF-16 units or bytes). No
 * file system or S3 limit is behind it: the name never reaches a storage key (storageKey is
 * built from ids and the fileKey) nor a path on disk; it is kept in a text column and sent
 * back in Content-Disposition (RFC 5987-encoded) and as an email attachment's name, none of
 * which limits its length. It is a bound on what a client may send, stated the way people
 * read it: characters, so that 255 emoji are as acceptable as 255 letters.
 */
export const MAX_FILENAME = 255;

export type FileField = Pick<FieldForValues, 'id' | 'type' | 'label' | 'attributes'>;

export function isFileField(field: Pick<FieldForValues, 'type'>): boolean {
  return field.type === 'file' || field.type === 'signature';
}

/** The limits of a file or signature field, with the defaults of src/modules/fields/types.ts. */
export function fileLimits(field: FileField): {
  maxFiles: number;
  maxFileSize: number;
  allowedTypes: string[] | undefined;
} {
  const a = field.attributes;
  if (field.type === 'signature') {
    return {
      maxFiles: 1,
      maxFileSize: typeof a.maxFileSize === 'number' ? a.maxFileSize : SIGNATURE_MAX_FILE_SIZE,
      allowedTypes: undefined,
    };
  }
  return {
    maxFiles: typeof a.maxFiles === 'number' ? a.maxFiles : DEFAULT_MAX_FILES,
    maxFileSize: typeof a.maxFileSize === 'number' ? a.maxFileSize : DEFAULT_MAX_FILE_SIZE,
    allowedTypes: Array.isArray(a.allowedTypes) ? (a.allowedTypes as string[]) : undefined,
  };
}

/** A new fileKey: 'fk_' and 32 base64url characters (192 random bits). */
export function newFileKey(): string {
  return `fk_${randomBytes(24).toString('base64url')}`;
}

export const FILE_KEY_PATTERN = /^fk_[A-Za-z0-9_-]{32}$/;

/** Objects are kept per account and form, under the fileKey: no client text reaches a key. */
export function storageKey(accountId: number, formId: number, fileKey: string): string {
  return `a${accountId}/f${formId}/${fileKey}`;
}

/**
 * The key a submission keeps a presigned upload's file under: S3 cannot revoke the URL, which
 * goes on writing to storageKey until it expires. Beside it, named after the fileKey; random,
 * so that a copy never overwrites another (a create made again copies again).
 */
export function keptKey(accountId: number, formId: number, fileKey: string): string {
  return `${storageKey(accountId, formId, fileKey)}-k${randomBytes(9).toString('base64url')}`;
}

const extension = (name: string): string => {
  const dot = name.lastIndexOf('.');
  return dot <= 0 ? '' : name.slice(dot + 1).toLowerCase();
};

/** C0 controls, DEL and C1 controls (U+0080–U+009F: NEL and the like, which some systems take as line ends). */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * The bidirectional controls: marks (LRM, RLM, ALM), embeddings and overrides (LRE, RLE, PDF,
 * LRO, RLO) and isolates (LRI, RLI, FSI, PDI). They change how a name is shown, not what it is:
 * "invoice\u202etxt.exe" shows as "invoiceexe.txt" and is an .exe.
 */
const BIDI = /[\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]/;

/**
 * Over MAX_FILENAME code points (a name has at least as many UTF-16 units as code points, so
 * only a long one is counted; a lone surrogate, which the API refuses before this, counts as one).
 */
const tooLong = (name: string): boolean => name.length > MAX_FILENAME && [...name].length > MAX_FILENAME;

/** Why a file name is refused for the field, or undefined when it is fine. */
export function filenameProblem(field: FileField, name: string): string | undefined {
  if (name.trim() === '') return 'the file name is empty';
  if (tooLong(name)) return `the file name is longer than ${MAX_FILENAME} characters`;
  if (/[/\\]/.test(name)) return 'the file name must not contain / or \\';
  if (CONTROL.test(name)) return 'the file name must not contain control characters (U+0000–U+001F, U+007F–U+009F)';
  if (BIDI.test(name))
    return 'the file name must not contain bidirectional controls (U+200E, U+200F, U+061C, U+202A–U+202E, U+2066–U+2069)';
  if (name === '.' || name === '..') return 'the file name must not be . or ..';
  const { allowedTypes } = fileLimits(field);
  if (allowedTypes && !allowedTypes.includes(extension(name)))
    return `"${name}" is not one of the allowed types (${allowedTypes.join(', ')})`;
  return undefined;
}

const CONTENT_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  pdf: 'application/pdf',
  txt: 'text/plain',
  csv: 'text/csv',
  json: 'application/json',
  zip: 'application/zip',
  doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  mp4: 'video/mp4',
  mp3: 'audio/mpeg',
};

/** The type a file name suggests; only informative (downloads are always application/octet-stream). */
export function contentTypeOf(name: string): string {
  return CONTENT_TYPES[extension(name)] ?? 'application/octet-stream';
}

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
export const PNG_MAGIC_LENGTH = PNG_MAGIC.length;

export function isPng(start: Buffer): boolean {
  return start.length >= PNG_MAGIC.length && start.subarray(0, PNG_MAGIC.length).equals(PNG_MAGIC);
}
