import type { KeyObject } from 'node:crypto';
import { Readable } from 'node:stream';
import { seal } from '../../crypto/envelope.js';
import { transact } from '../../db/transaction.js';
import { fileAad } from '../encryption/keys.js';
import { enqueue } from '../../jobs/outbox.js';
import { removeFilesJob } from '../uploads/jobs.js';
import type { Transaction } from 'kysely';
import type { AppContext } from '../../context.js';
import type { Database, UploadRow } from '../../db/schema.js';
import { BadRequestError, type ErrorDetail } from '../../errors.js';
import * as uploadsRepo from '../uploads/repository.js';
import { removeAfterUrlExpiry } from '../uploads/service.js';
import { ObjectNotFoundError } from '../../storage/types.js';
import {
  contentTypeOf,
  FILE_KEY_PATTERN,
  filenameProblem,
  fileLimits,
  isFileField,
  isPng,
  keptKey,
  newFileKey,
  PNG_MAGIC_LENGTH,
  storageKey,
  type FileField,
} from '../uploads/rules.js';
import type { SubmissionCreate } from './schemas.js';
import { fileRefs, isEmptyInput, ResolvedFiles, type FileRef, type StoredValue } from './values.js';

/**
 * File and signature values. A field's files come either as fileKeys of uploads made
 * through upload-urls, or inline in the request as base64 (`{"filename", "content"}`, or
 * the original service's `"name.ext;<base64>"`), never both in one field. Checking them
 * needs the database and storage, so it happens before the rest of the values are read;
 * each file field's input is then replaced by a ResolvedFiles that readValue takes as is.
 */

class FileError extends Error {}

type FileInput = { kind: 'keys'; keys: string[] } | { kind: 'inline'; files: { name: string; bytes: Buffer }[] };

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function decodeBase64(text: string): Buffer {
  const compact = text.replace(/\s+/g, '');
  if (!BASE64.test(compact)) throw new FileError('content is not valid base64');
  return Buffer.from(compact, 'base64');
}

function items(input: unknown): unknown[] {
  // `{"value": …}` is unwrapped in a loop: nested thousands of levels deep, recursion would overflow the stack.
  let raw = input;
  while (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    const keys = Object.keys(raw);
    if (keys.length !== 1 || keys[0] !== 'value') break;
    raw = (raw as { value: unknown }).value;
  }
  if (Array.isArray(raw)) return raw;
  if (typeof raw === 'object' && raw !== null) {
    const obj = raw as Record<string, unknown>;
    const keys = Object.keys(obj);
    if (keys.length === 1 && keys[0] === 'subvalues') {
      if (!Array.isArray(obj.subvalues)) throw new FileError('subvalues must be a list');
      return obj.subvalues.map((s) => {
        const sub = typeof s === 'object' && s !== null ? (s as Record<string, unknown>) : undefined;
        if (!sub || Object.keys(sub).length !== 1 || !('subvalue' in sub))
          throw new FileError('each subvalue must be {"subvalue": ...}');
        return sub.subvalue;
      });
    }
  }
  return [raw];
}

/** Reads what was sent for a file or signature field; null clears it. Throws FileError. */
function parseFileInput(field: FileField, raw: unknown): FileInput | null {
  if (isEmptyInput(raw)) return null;
  const { maxFiles, maxFileSize } = fileLimits(field);
  const keys: string[] = [];
  const files: { name: string; bytes: Buffer }[] = [];
  for (const item of items(raw)) {
    if (typeof item === 'string' && !item.includes(';')) {
      if (keys.includes(item)) throw new FileError(`fileKey ${item} is given twice`);
      keys.push(item);
      continue;
    }
    let name: unknown;
    let content: unknown;
    if (typeof item === 'string') {
      // Cut at the last ';': base64 holds none, while a file name may ("report;v2.pdf").
      const cut = item.lastIndexOf(';');
      [name, content] = [item.slice(0, cut), item.slice(cut + 1)];
    } else if (typeof item === 'object' && item !== null && !Array.isArray(item)) {
      const obj = item as Record<string, unknown>;
      const extra = Object.keys(obj).find((k) => k !== 'filename' && k !== 'content');
      if (extra) throw new FileError(`an inline upload has no property "${extra}" (use filename and content)`);
      [name, content] = [obj.filename, obj.content];
    }
    if (typeof name !== 'string' || typeof content !== 'string') {
      throw new FileError(
        'each file must be a fileKey, {"filename": ..., "content": "<base64>"} or "name.ext;<base64>"',
      );
    }
    const problem = filenameProblem(field, name);
    if (problem) throw new FileError(problem);
    const bytes = decodeBase64(content);
    if (bytes.length === 0) throw new FileError(`${name} is empty`);
    if (bytes.length > maxFileSize)
      throw new FileError(`${name} is larger than this field allows (${maxFileSize} bytes)`);
    if (field.type === 'signature' && !isPng(bytes)) throw new FileError('a signature must be a PNG image');
    files.push({ name, bytes });
  }
  if (keys.length > 0 && files.length > 0)
    throw new FileError('mixes fileKeys with inline uploads; send one or the other');
  const count = keys.length + files.length;
  if (count > maxFiles) throw new FileError(`takes at most ${maxFiles} file${maxFiles === 1 ? '' : 's'}; got ${count}`);
  return keys.length > 0 ? { kind: 'keys', keys } : { kind: 'inline', files };
}

interface Claim {
  fileKey: string;
  fromState: 'stored' | 'issued';
  size: number;
  /**
   * A presigned upload: its URL takes PUTs until it expires, so the submission keeps a copy of
   * the object under a key of its own (to), which storeFiles makes and checks again.
   */
  copy?: { from: string; to: string; filename: string; field: FileField; at: number };
}

interface InlineFile {
  row: Omit<UploadRow, 'submission_id' | 'receiver' | 'receive_token'>;
  bytes: Buffer;
}

/** What storing a submission's files takes: claims of uploads (and copies), inline bytes to write, files to let go. */
export interface FilePlan {
  claims: Claim[];
  inline: InlineFile[];
  /** Files the submission held in the fields being replaced (edit): removed once the edit commits. */
  replaced: string[];
}

export const NO_FILES: FilePlan = { claims: [], inline: [], replaced: [] };

async function startOf(ctx: AppContext, key: string): Promise<Buffer> {
  const { stream } = await ctx.storage.get(key, { start: 0, end: PNG_MAGIC_LENGTH - 1 });
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Checks one fileKey against its upload (and, for presigned uploads, the object): the problem, or the file. */
async function checkKey(
  ctx: AppContext,
  field: FileField,
  at: number,
  formId: number,
  upload: UploadRow | undefined,
  key: string,
  current: { submissionId: number; files: FileRef[] } | undefined,
  now: number,
  sealing: boolean,
  removeOversized: boolean,
): Promise<{ file: FileRef; claim?: Claim } | string> {
  if (!upload || !FILE_KEY_PATTERN.test(key)) return `unknown fileKey ${key}`;
  if (upload.form_id !== formId) return `fileKey ${key} belongs to another form`;
  if (upload.field_id !== field.id) return `fileKey ${key} was issued for another field`;
  if (upload.state === 'claimed') {
    // On edit, a file the submission already holds in this field may be sent again to keep it.
    const kept =
      current && upload.submission_id === current.submissionId
        ? current.files.find((f) => f.fileKey === key)
        : undefined;
    return kept ? { file: kept } : `fileKey ${key} has already been used`;
  }
  if (upload.expires_at <= now) return `fileKey ${key} has expired`;
  if (upload.state === 'receiving') return `fileKey ${key} is still being uploaded`;
  // An upload is sealed, or not, as it arrives; one made before the form's encryption changed does not fit it.
  if ((upload.sealed === 1) !== sealing)
    return `fileKey ${key} was uploaded before this form's encryption changed; ask for a new upload URL`;
  const { maxFileSize } = fileLimits(field);
  let size: number;
  if (upload.state === 'stored') {
    size = upload.size ?? 0;
  } else if (upload.via === 'presigned') {
    // A presigned PUT goes straight to the bucket, which enforces neither the size limit nor
    // single use: the object is checked here, and one over the limit is removed.
    const head = await ctx.storage.head(upload.storage_key);
    if (!head) return `fileKey ${key} has not been uploaded yet`;
    size = head.size;
    if (size > maxFileSize) {
      if (removeOversized) await ctx.storage.deleteMany([upload.storage_key]);
      return `${upload.filename} is larger than this field allows (${maxFileSize} bytes)`;
    }
  } else {
    return `fileKey ${key} has not been uploaded yet`;
  }
  if (size > maxFileSize) return `${upload.filename} is larger than this field allows (${maxFileSize} bytes)`;
  // One rule with inline files: an empty file is refused however it came (a presigned PUT, or
  // a service upload stored before the service refused empty ones).
  if (size === 0) return `${upload.filename} is empty`;
  // A sealed signature had its PNG check while it arrived (its stored bytes do not show it).
  if (field.type === 'signature' && upload.sealed === 0 && !isPng(await startOf(ctx, upload.storage_key)))
    return 'a signature must be a PNG image';
  const claim: Claim = { fileKey: key, fromState: upload.state === 'stored' ? 'stored' : 'issued', size };
  // A service upload's URL is used up once it stored the file; a presigned one is not.
  if (upload.state === 'issued')
    claim.copy = {
      from: upload.storage_key,
      to: keptKey(upload.account_id, upload.form_id, key),
      filename: upload.filename,
      field,
      at,
    };
  return { file: { fileKey: key, name: upload.filename, size, contentType: upload.content_type }, claim };
}

/**
 * Checks the file and signature values of a create or edit and replaces them with their
 * files; throws a 400 naming every offending field. Reads the database and storage, writes
 * nothing (except removing a presigned object over the size limit, unless told not to: a
 * create checking against a definition that may be out of date, see createSubmission): the
 * copies of presigned uploads are storeFiles' to make.
 */
export async function resolveFiles(
  ctx: AppContext,
  def: { formId: number; byId: Map<number, FileField>; seal?: { publicKey: KeyObject } },
  accountId: number,
  inputs: SubmissionCreate['fields'],
  current?: { submissionId: number; data: Map<number, StoredValue> },
  { removeOversized } = { removeOversized: true },
): Promise<{ inputs: SubmissionCreate['fields']; plan: FilePlan }> {
  const now = ctx.clock.now();
  const problems: ErrorDetail[] = [];
  const parsed: { i: number; field: FileField; input: FileInput | null }[] = [];
  inputs.forEach((input, i) => {
    const field = def.byId.get(Number(input.id));
    if (!field || !isFileField(field)) return;
    try {
      parsed.push({ i, field, input: parseFileInput(field, input.value) });
    } catch (error) {
      if (!(error instanceof FileError)) throw error;
      problems.push({ property: `body.fields[${i}].value`, message: `${field.label} (${field.id}): ${error.message}` });
    }
  });
  if (parsed.length === 0 && problems.length === 0) return { inputs, plan: NO_FILES };

  const allKeys = parsed.flatMap((p) => (p.input?.kind === 'keys' ? p.input.keys : []));
  const uploads = new Map(
    (
      await uploadsRepo.findUploads(
        ctx.db,
        accountId,
        allKeys.filter((k) => FILE_KEY_PATTERN.test(k)),
      )
    ).map((u) => [u.file_key, u]),
  );
  const plan: FilePlan = { claims: [], inline: [], replaced: [] };
  const out = [...inputs];
  for (const { i, field, input } of parsed) {
    const held = fileRefs(current?.data.get(field.id)) ?? [];
    const files: FileRef[] = [];
    if (input?.kind === 'keys') {
      for (const key of input.keys) {
        const result = await checkKey(
          ctx,
          field,
          i,
          def.formId,
          uploads.get(key),
          key,
          current && { submissionId: current.submissionId, files: held },
          now,
          def.seal !== undefined,
          removeOversized,
        );
        if (typeof result === 'string') {
          problems.push({ property: `body.fields[${i}].value`, message: `${field.label} (${field.id}): ${result}` });
          continue;
        }
        files.push(result.file);
        if (result.claim) plan.claims.push(result.claim);
      }
    } else if (input?.kind === 'inline') {
      for (const f of input.files) {
        const fileKey = newFileKey();
        const contentType = contentTypeOf(f.name);
        plan.inline.push({
          // An encrypted form's files are sealed before they reach storage.
          bytes: def.seal ? seal(f.bytes, def.seal.publicKey, fileAad(fileKey)) : f.bytes,
          row: {
            file_key: fileKey,
            account_id: accountId,
            form_id: def.formId,
            field_id: field.id,
            filename: f.name,
            content_type: contentType,
            storage_key: storageKey(accountId, def.formId, fileKey),
            max_size: fileLimits(field).maxFileSize,
            size: f.bytes.length,
            state: 'claimed',
            via: 'service',
            expires_at: now,
            created_at: now,
            sealed: def.seal ? 1 : 0,
          },
        });
        files.push({ fileKey, name: f.name, size: f.bytes.length, contentType });
      }
    }
    const keep = new Set(files.map((f) => f.fileKey));
    plan.replaced.push(...held.filter((f) => !keep.has(f.fileKey)).map((f) => f.fileKey));
    out[i] = { ...inputs[i]!, value: new ResolvedFiles(files) };
  }
  if (problems.length > 0) {
    // In the order of the fields sent, whichever check found them.
    const at = (d: ErrorDetail) => Number(/\[(\d+)\]/.exec(d.property)?.[1]);
    problems.sort((x, y) => at(x) - at(y));
    throw new BadRequestError('invalid_submission', `${problems[0]!.property}: ${problems[0]!.message}`, {
      details: problems,
    });
  }
  return { inputs: out, plan };
}

/**
 * Writes the inline files to storage and copies presigned uploads to their submission's keys;
 * before the transaction, so that slow I/O stays out of it. A copy is checked again: a PUT to
 * the URL between resolveFiles' check and the copy would otherwise be kept unchecked. Throws a
 * 400 naming the field when a copy is not what was checked, keeping nothing it wrote.
 */
export async function storeFiles(ctx: AppContext, plan: FilePlan): Promise<void> {
  const written: string[] = [];
  const problems: ErrorDetail[] = [];
  try {
    for (const f of plan.inline) {
      // The size was checked on the file itself; sealed bytes are a little longer.
      await ctx.storage.put(f.row.storage_key, Readable.from([f.bytes]), {
        maxBytes: f.bytes.length,
        contentType: f.row.content_type,
      });
      written.push(f.row.storage_key);
    }
    for (const { fileKey, size, copy } of plan.claims) {
      if (!copy) continue;
      const problem = await copyChecked(ctx, fileKey, size, copy, written);
      if (problem)
        problems.push({
          property: `body.fields[${copy.at}].value`,
          message: `${copy.field.label} (${copy.field.id}): ${problem}`,
        });
    }
    if (problems.length > 0)
      throw new BadRequestError('invalid_submission', `${problems[0]!.property}: ${problems[0]!.message}`, {
        details: problems,
      });
  } catch (error) {
    await ctx.storage.deleteMany(written).catch(() => undefined);
    throw error;
  }
}

/**
 * Copies the object of a presigned upload to its kept key (written learns of it) and checks
 * the copy, which no URL reaches: the problem, if it is not the file that was checked.
 */
async function copyChecked(
  ctx: AppContext,
  fileKey: string,
  size: number,
  copy: NonNullable<Claim['copy']>,
  written: string[],
): Promise<string | undefined> {
  let copied: { size: number };
  try {
    copied = await ctx.storage.copy(copy.from, copy.to);
  } catch (error) {
    if (error instanceof ObjectNotFoundError) return `fileKey ${fileKey} has not been uploaded yet`;
    throw error;
  }
  written.push(copy.to);
  // The same size keeps every size rule checked, and the size the value lists true.
  if (copied.size !== size) return `${copy.filename} changed while the submission was checked; send it again`;
  if (copy.field.type === 'signature' && !isPng(await startOf(ctx, copy.to))) return 'a signature must be a PNG image';
  return undefined;
}

/**
 * Files written for a submission that was not (inline files, copies of presigned uploads):
 * removed now, or by a job if storage fails (carrying requestId when given, else the
 * request-id context's).
 */
export async function discardFiles(ctx: AppContext, plan: FilePlan, requestId?: string): Promise<void> {
  const keys = [
    ...plan.inline.map((f) => f.row.storage_key),
    ...plan.claims.flatMap((c) => (c.copy ? [c.copy.to] : [])),
  ];
  if (keys.length === 0) return;
  try {
    await ctx.storage.deleteMany(keys);
  } catch {
    // No row names these objects, so the sweep would never find them: the outbox keeps trying.
    await transact(ctx.db, (trx) => enqueue(trx, removeFilesJob, { keys }, { requestId }));
  }
}

/**
 * Inside the submission's transaction: records the inline files, claims the uploads (a
 * presigned one moving to its copy), and lets go of replaced ones. The objects no row names
 * any more go through the outbox once the transaction commits, and the keys of presigned URLs
 * once more when they expire. A claim that fails (another submission took the upload
 * meanwhile) fails the transaction.
 */
export async function commitFiles(
  trx: Transaction<Database>,
  accountId: number,
  plan: FilePlan,
  submissionId: number,
  now: number,
): Promise<void> {
  await uploadsRepo.insertUploads(
    trx,
    plan.inline.map((f) => ({ ...f.row, submission_id: submissionId })),
  );
  for (const { copy, ...claim } of plan.claims) {
    if (!(await uploadsRepo.claimUpload(trx, { ...claim, submissionId, now, storageKey: copy?.to }))) {
      throw new BadRequestError('invalid_submission', `fileKey ${claim.fileKey} has already been used or has expired`, {
        details: [
          { property: 'body.fields', message: `fileKey ${claim.fileKey} has already been used or has expired` },
        ],
      });
    }
  }
  const copied = plan.claims.filter((c) => c.copy);
  const rows = plan.replaced.length === 0 ? [] : await uploadsRepo.findUploads(trx, accountId, plan.replaced);
  const letGo = [...copied.map((c) => c.fileKey), ...rows.map((r) => r.file_key)];
  if (letGo.length === 0) return;
  await removeAfterUrlExpiry(trx, letGo, now);
  const unused = [
    ...copied.map((c) => c.copy!.from),
    ...(await uploadsRepo.deleteUploads(
      trx,
      rows.map((r) => r.file_key),
    )),
  ];
  if (unused.length > 0) await enqueue(trx, removeFilesJob, { keys: unused });
}
