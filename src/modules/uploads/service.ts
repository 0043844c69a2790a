import { randomBytes, type KeyObject } from 'node:crypto';
import { Transform, Writable, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { openStream, SEAL_OVERHEAD, SealError, sealStream, type FormKeys } from '../../crypto/envelope.js';
import type { AppContext } from '../../context.js';
import type { UploadRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import {
  AppError,
  BadRequestError,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  type ErrorDetail,
} from '../../errors.js';
import { enqueue } from '../../jobs/outbox.js';
import { fileAad, sealingKeyOf } from '../encryption/keys.js';
import { isoTime } from '../../http/schemas.js';
import { ObjectNotFoundError, ObjectTooLargeError, type Storage } from '../../storage/types.js';
import { toDefinition } from '../fields/definition.js';
import * as fieldsRepo from '../fields/repository.js';
import * as formsRepo from '../forms/repository.js';
import type { FileRef } from '../submissions/values.js';
import { removeFilesJob } from './jobs.js';
import * as repo from './repository.js';
import {
  contentTypeOf,
  filenameProblem,
  fileLimits,
  isFileField,
  isPng,
  newFileKey,
  PNG_MAGIC_LENGTH,
  storageKey,
  UPLOAD_URL_TTL_MS,
} from './rules.js';
import type { UploadUrls } from './schemas.js';
import { signatureMatches, signedUploadPath } from './signing.js';
import type { AccountScope, FieldRef, SubmissionRef } from '../permissions/caller.js';

/**
 * How the bytes of an upload reach storage: 'presigned' straight to the bucket when the
 * driver can sign a PUT, else 'service' through PUT /uploads/{fileKey}. serviceOnly sends
 * an upload through the service whatever the driver, for uploads the service must see on
 * the way in (a per-upload choice: the service route works with either driver).
 */
export function uploadVia(storage: Storage, options: { serviceOnly?: boolean } = {}): UploadRow['via'] {
  return storage.presignPut && !options.serviceOnly ? 'presigned' : 'service';
}

/** The URL the client PUTs the file to. */
export async function uploadUrlFor(
  ctx: AppContext,
  upload: Pick<UploadRow, 'file_key' | 'storage_key' | 'via' | 'expires_at'>,
): Promise<string> {
  if (upload.via === 'presigned' && ctx.storage.presignPut) {
    const seconds = Math.max(1, Math.floor((upload.expires_at - ctx.clock.now()) / 1000));
    return ctx.storage.presignPut(upload.storage_key, seconds);
  }
  return `${ctx.config.publicUrl}${signedUploadPath(ctx.config.secretKey, upload.file_key, Math.floor(upload.expires_at / 1000))}`;
}

export async function issueUploadUrls(
  ctx: AppContext,
  { accountId }: AccountScope,
  { formId, fieldId }: FieldRef,
  filenames: string[],
): Promise<UploadUrls> {
  const form = await formsRepo.findForm(ctx.db, accountId, formId);
  if (!form) throw new NotFoundError('form_not_found');
  const row = await fieldsRepo.findField(ctx.db, accountId, formId, fieldId);
  if (!row) throw new NotFoundError('field_not_found');
  const field = { id: row.id, ...toDefinition(row) };
  if (!isFileField(field))
    throw new BadRequestError(
      'not_a_file_field',
      `Field ${fieldId} is a ${field.type} field; only file and signature fields take uploads`,
      { details: [{ property: 'path.fieldId', message: 'is not a file or signature field' }] },
    );
  const { maxFiles, maxFileSize } = fileLimits(field);
  if (filenames.length > maxFiles) {
    throw new BadRequestError(
      'too_many_files',
      `${field.label} (${fieldId}) takes at most ${maxFiles} file${maxFiles === 1 ? '' : 's'}`,
      {
        details: [
          {
            property: 'body.filenames',
            message: `names ${filenames.length} files; the field takes at most ${maxFiles}`,
          },
        ],
      },
    );
  }
  const problems: ErrorDetail[] = [];
  filenames.forEach((name, i) => {
    const problem = filenameProblem(field, name);
    if (problem) problems.push({ property: `body.filenames[${i}]`, message: problem });
  });
  if (problems.length > 0)
    throw new BadRequestError('invalid_filename', `${problems[0]!.property}: ${problems[0]!.message}`, {
      details: problems,
    });

  const now = ctx.clock.now();
  // An encrypted form's files pass through the service, which seals them before storage
  // sees a byte: a presigned PUT would put them in the bucket in the clear.
  const via = uploadVia(ctx.storage, { serviceOnly: sealingKeyOf(form) !== undefined });
  const rows = filenames.map((filename) => {
    const fileKey = newFileKey();
    return {
      file_key: fileKey,
      account_id: accountId,
      form_id: formId,
      field_id: fieldId,
      filename,
      content_type: contentTypeOf(filename),
      storage_key: storageKey(accountId, formId, fileKey),
      max_size: maxFileSize,
      size: null,
      state: 'issued' as const,
      via,
      expires_at: now + UPLOAD_URL_TTL_MS,
      submission_id: null,
      created_at: now,
      sealed: 0,
    };
  });
  await transact(ctx.db, (trx) => repo.insertUploads(trx, rows));
  const uploads = await Promise.all(
    rows.map(async (r) => ({
      filename: r.filename,
      fileKey: r.file_key,
      uploadUrl: await uploadUrlFor(ctx, r),
      expiresAt: isoTime(r.expires_at),
    })),
  );
  return { uploads };
}

/**
 * Takes the bytes of one service upload: checks the signed URL, uses it up (a conditional
 * state change, so two PUTs cannot both take it), and streams the body into storage with
 * the field's size limit. A refused or broken upload keeps nothing and gives the URL back.
 */
export async function receiveUpload(
  ctx: AppContext,
  fileKey: string,
  query: { expires: number; signature: string },
  body: Readable,
  contentLength: number | undefined,
): Promise<{ fileKey: string; size: number }> {
  if (!signatureMatches(ctx.config.secretKey, fileKey, query.expires, query.signature))
    throw new ForbiddenError('upload_url_invalid');
  const now = ctx.clock.now();
  if (query.expires * 1000 <= now) throw new AppError('upload_url_expired');
  const upload = await repo.findUpload(ctx.db, fileKey);
  if (!upload) throw new AppError('upload_url_expired');
  if (contentLength !== undefined && contentLength > upload.max_size) {
    throw new AppError('file_too_large', `The file is larger than this field allows (${upload.max_size} bytes)`);
  }
  // An empty file is refused as an inline one is; with nothing begun, the URL stays as it was.
  if (contentLength === 0) throw emptyFile(upload.filename);
  const receiver: repo.Receiver = { owner: ctx.presence.id, token: randomBytes(16).toString('hex') };
  let target = upload.storage_key;
  if (!(await repo.startReceiving(ctx.db, fileKey, now, receiver))) {
    const current = await repo.findUpload(ctx.db, fileKey);
    if (!current || current.expires_at <= now) throw new AppError('upload_url_expired');
    // An upload whose receiving process stopped (killed, crashed) gives its URL back at once.
    const receiving = current.state === 'receiving';
    const abandoned =
      receiving &&
      current.receiver !== null &&
      current.receive_token !== null &&
      (await ctx.presence.stopped([current.receiver])).has(current.receiver);
    target = storageKey(current.account_id, current.form_id, newFileKey());
    if (!abandoned || !(await repo.takeOverReceiving(ctx.db, fileKey, current.receive_token!, receiver, target, now))) {
      throw new ConflictError(
        'upload_url_used',
        receiving ? 'An upload to this URL is under way; it can be retried if it fails' : undefined,
      );
    }
  }
  let size: number;
  let sealed = false;
  // A body without a byte (chunked, or no Content-Length) fails at its end, before storage
  // keeps anything: the refused upload then gives the URL back like any other.
  const guard = new NonEmpty();
  pipeline(body, guard).catch(() => undefined); // an error of the body reaches storage through guard
  try {
    const incoming = await sealIfEncrypted(ctx, upload, guard);
    sealed = incoming.sealed;
    ({ size } = await ctx.storage.put(target, incoming.stream, {
      maxBytes: upload.max_size + (sealed ? SEAL_OVERHEAD : 0),
      contentType: upload.content_type,
    }));
    if (sealed) size -= SEAL_OVERHEAD;
  } catch (error) {
    await repo.abandonReceiving(ctx.db, fileKey, receiver.token);
    if (guard.empty) throw emptyFile(upload.filename, error);
    if (error instanceof ObjectTooLargeError)
      throw new AppError('file_too_large', `The file is larger than this field allows (${upload.max_size} bytes)`, {
        cause: error,
      });
    if (error instanceof NotPngError) throw new BadRequestError('not_png');
    throw error;
  }
  if (!(await repo.finishReceiving(ctx.db, fileKey, receiver.token, size, sealed))) {
    // Swept while the bytes came in (the URL expired meanwhile), or taken over by another
    // PUT after this process was judged stopped (the other PUT writes another object): keep nothing.
    await ctx.storage.deleteMany([target]);
    const current = await repo.findUpload(ctx.db, fileKey);
    if (current && current.expires_at > ctx.clock.now())
      throw new ConflictError('upload_url_used', 'This upload URL was taken over by another upload');
    throw new AppError('upload_url_expired', 'This upload URL expired while the file was being uploaded');
  }
  return { fileKey, size };
}

/**
 * How long after a presigned URL's expiry its key is removed once more: S3 checks the expiry
 * by its own clock, and takes requests from clocks up to 15 minutes apart.
 */
const PRESIGNED_EXPIRY_MARGIN_MS = 15 * 60 * 1000;

/**
 * In the transaction that deletes these uploads' rows (a submission deleted, files replaced by
 * an edit): a presigned URL cannot be revoked, so until it expires a PUT to it makes its
 * object again, which no row would name and no sweep would find. Its key is removed once more
 * after the URL's expiry.
 */
export async function removeAfterUrlExpiry(trx: Executor, fileKeys: string[], now: number): Promise<void> {
  const byExpiry = new Map<number, string[]>();
  for (const u of await repo.livePresigned(trx, fileKeys, now)) {
    const keys = byExpiry.get(u.expires_at) ?? [];
    keys.push(storageKey(u.account_id, u.form_id, u.file_key));
    byExpiry.set(u.expires_at, keys);
  }
  for (const [expiresAt, keys] of byExpiry)
    await enqueue(trx, removeFilesJob, { keys }, { runAt: expiresAt + PRESIGNED_EXPIRY_MARGIN_MS });
}

export interface Download {
  filename: string;
  size: number;
  stream: Readable;
}

/**
 * The bytes of a file a submission holds (found by the submissions service, which checks the
 * submission and, for an encrypted form, the password); a sealed file is opened as it streams.
 */
export async function openDownload(
  ctx: AppContext,
  { accountId }: AccountScope,
  { submissionId }: SubmissionRef,
  file: FileRef,
  keys: FormKeys | undefined,
): Promise<Download> {
  const upload = await repo.findClaimed(ctx.db, accountId, submissionId, file.fileKey);
  if (!upload) throw new NotFoundError('file_not_found');
  if (upload.sealed === 1 && !keys) throw new ConflictError('file_sealed');
  try {
    if (upload.sealed === 1) await verifySealed(ctx, upload, keys!);
    const object = await ctx.storage.get(upload.storage_key);
    if (upload.sealed === 0) return { filename: file.name, size: object.size, stream: object.stream };
    const opened = openStream(keys!, fileAad(upload.file_key));
    pipeline(object.stream, opened).catch(() => undefined); // an error reaches the reader through opened
    return { filename: file.name, size: object.size - SEAL_OVERHEAD, stream: opened };
  } catch (error) {
    if (error instanceof ObjectNotFoundError) throw new NotFoundError('file_not_found', undefined, { cause: error });
    throw error;
  }
}

export interface FileMove {
  fileKey: string;
  from: string;
  to: string;
}

/**
 * Writes sealed (publicKey given) or opened (keys given) copies of a conversion's files under
 * new storage keys, before its transaction; the transaction then points the uploads at them
 * (commitFileMoves). Keys are fresh each time, so no copy ever overwrites a live object; a copy
 * whose transaction never commits (the process died in between) stays behind, unreferenced.
 */
export async function convertFiles(
  ctx: AppContext,
  files: UploadRow[],
  to: { publicKey: KeyObject } | { keys: FormKeys },
): Promise<FileMove[]> {
  const moves: FileMove[] = [];
  try {
    for (const file of files) {
      let object;
      try {
        object = await ctx.storage.get(file.storage_key);
      } catch (error) {
        // A file whose object is gone has nothing to convert; failing on it would stop the job for good.
        if (error instanceof ObjectNotFoundError) continue;
        throw error;
      }
      const aad = fileAad(file.file_key);
      const transform = 'publicKey' in to ? sealStream(to.publicKey, aad) : openStream(to.keys, aad);
      const flowing = pipeline(object.stream, transform);
      flowing.catch(() => undefined);
      const target = storageKey(file.account_id, file.form_id, newFileKey());
      try {
        await ctx.storage.put(target, transform, {
          maxBytes: object.size + SEAL_OVERHEAD,
          contentType: file.content_type,
        });
      } catch (error) {
        object.stream.destroy();
        transform.destroy();
        throw error;
      }
      moves.push({ fileKey: file.file_key, from: file.storage_key, to: target });
    }
  } catch (error) {
    // Copies written so far would never be referenced (and, decrypting, are in the clear).
    await discardCopies(ctx, moves);
    throw error;
  }
  return moves;
}

export async function discardCopies(ctx: AppContext, moves: FileMove[]): Promise<void> {
  if (moves.length > 0) await ctx.storage.deleteMany(moves.map((m) => m.to)).catch(() => undefined);
}

/**
 * In the conversion's transaction: the uploads move to their new objects; the objects left
 * behind go through the outbox. A file claimed before submissions kept copies of presigned
 * uploads still lives under its URL's key, which takes PUTs until the URL expires: that key
 * is removed once more then, as when a file is let go.
 */
export async function commitFileMoves(trx: Executor, moves: FileMove[], sealed: boolean, now: number): Promise<void> {
  const unused: string[] = [];
  for (const move of moves)
    unused.push((await repo.moveUpload(trx, move.fileKey, move.from, move.to, sealed)) ? move.from : move.to);
  if (unused.length > 0) await enqueue(trx, removeFilesJob, { keys: unused });
  await removeAfterUrlExpiry(
    trx,
    moves.map((m) => m.fileKey),
    now,
  );
}

/**
 * GCM's tag comes after the last byte, so a sealed file streamed straight out would reach the
 * client whole before an alteration showed: it is read once through to check the tag, and
 * only then sent (a second read). The cost is reading it twice.
 */
async function verifySealed(ctx: AppContext, upload: UploadRow, keys: FormKeys): Promise<void> {
  const object = await ctx.storage.get(upload.storage_key);
  try {
    await pipeline(
      object.stream,
      openStream(keys, fileAad(upload.file_key)),
      new Writable({ write: (_chunk, _enc, done) => done() }),
    );
  } catch (error) {
    if (!(error instanceof SealError)) throw error;
    throw new AppError('file_integrity_failed', undefined, { cause: error });
  }
}

class NotPngError extends Error {}

/** The refusal of an empty file, in the words of an inline one's (submissions/files.ts). */
function emptyFile(filename: string, cause?: unknown): BadRequestError {
  const message = `${filename} is empty`;
  return new BadRequestError('invalid_request', message, { details: [{ property: 'body', message }], cause });
}

/** Passes bytes through; fails at the end when there were none, and then says so (empty). */
class NonEmpty extends Transform {
  empty = false;
  private seen = false;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (chunk.length > 0) this.seen = true;
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.seen) return done();
    this.empty = true;
    done(new Error('the file is empty'));
  }
}

/** For an encrypted form: the upload's bytes sealed as they arrive (a signature checked for PNG first). */
async function sealIfEncrypted(
  ctx: AppContext,
  upload: UploadRow,
  body: Readable,
): Promise<{ stream: Readable; sealed: boolean }> {
  const form = await formsRepo.findFormById(ctx.db, upload.form_id);
  const publicKey = form && sealingKeyOf(form);
  if (!publicKey) return { stream: body, sealed: false };
  const field = await fieldsRepo.findField(ctx.db, upload.account_id, upload.form_id, upload.field_id);
  const out = sealStream(publicKey, fileAad(upload.file_key));
  // Errors of the body (a client that breaks off) or of the check reach storage through out.
  (field?.type === 'signature' ? pipeline(body, pngFirst(), out) : pipeline(body, out)).catch(() => undefined);
  return { stream: out, sealed: true };
}

/** Passes bytes through once the first eight are a PNG signature; fails the stream otherwise. */
function pngFirst(): Transform {
  let head = Buffer.alloc(0);
  let checked = false;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      if (checked) return done(null, chunk);
      head = Buffer.concat([head, chunk]);
      if (head.length < PNG_MAGIC_LENGTH) return done();
      if (!isPng(head)) return done(new NotPngError());
      checked = true;
      done(null, head);
    },
    flush(done) {
      done(checked ? null : new NotPngError());
    },
  });
}
