import type { Insertable } from 'kysely';
import type { UploadRow, UploadsTable } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';

export async function insertUploads(db: Executor, rows: Insertable<UploadsTable>[]): Promise<void> {
  if (rows.length > 0) await db.insertInto('uploads').values(rows).execute();
}

export async function findUpload(db: Executor, fileKey: string): Promise<UploadRow | undefined> {
  return db.selectFrom('uploads').selectAll().where('file_key', '=', fileKey).executeTakeFirst();
}

/** The uploads of the account among these fileKeys (another account's are simply not found). */
export async function findUploads(db: Executor, accountId: number, fileKeys: string[]): Promise<UploadRow[]> {
  if (fileKeys.length === 0) return [];
  return db
    .selectFrom('uploads')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('file_key', 'in', fileKeys)
    .execute();
}

/** Who takes an upload's bytes: the process (processes.id) and a token that fences this attempt's writes. */
export interface Receiver {
  owner: number;
  token: string;
}

/** issued → receiving, only for a service upload whose URL is still valid: the single use of the URL. */
export async function startReceiving(db: Executor, fileKey: string, now: number, receiver: Receiver): Promise<boolean> {
  const r = await db
    .updateTable('uploads')
    .set({ state: 'receiving', receiver: receiver.owner, receive_token: receiver.token })
    .where('file_key', '=', fileKey)
    .where('state', '=', 'issued')
    .where('via', '=', 'service')
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/**
 * Takes over an upload whose receiver stopped mid-way, if it is still that attempt
 * (its token). The new attempt writes to a new object (storageKey): should the old
 * receiver still be writing after all, it cannot overwrite the new one's bytes.
 */
export async function takeOverReceiving(
  db: Executor,
  fileKey: string,
  abandoned: string,
  receiver: Receiver,
  storageKey: string,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('uploads')
    .set({ receiver: receiver.owner, receive_token: receiver.token, storage_key: storageKey })
    .where('file_key', '=', fileKey)
    .where('state', '=', 'receiving')
    .where('receive_token', '=', abandoned)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export async function finishReceiving(
  db: Executor,
  fileKey: string,
  token: string,
  size: number,
  sealed: boolean,
): Promise<boolean> {
  const r = await db
    .updateTable('uploads')
    .set({ state: 'stored', size, sealed: sealed ? 1 : 0, receiver: null, receive_token: null })
    .where('file_key', '=', fileKey)
    .where('state', '=', 'receiving')
    .where('receive_token', '=', token)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/** A refused or broken upload gives its URL back: only a complete upload uses it up. */
export async function abandonReceiving(db: Executor, fileKey: string, token: string): Promise<void> {
  await db
    .updateTable('uploads')
    .set({ state: 'issued', receiver: null, receive_token: null })
    .where('file_key', '=', fileKey)
    .where('state', '=', 'receiving')
    .where('receive_token', '=', token)
    .execute();
}

/**
 * Gives the upload to a submission, if it is still in the state it was checked in and not
 * expired: two submissions racing for one fileKey cannot both get it. storageKey, when given,
 * is the object the upload holds from now on (a presigned upload's copy).
 */
export async function claimUpload(
  db: Executor,
  claim: {
    fileKey: string;
    fromState: 'stored' | 'issued';
    size: number;
    submissionId: number;
    now: number;
    storageKey?: string;
  },
): Promise<boolean> {
  const r = await db
    .updateTable('uploads')
    .set({
      state: 'claimed',
      submission_id: claim.submissionId,
      size: claim.size,
      ...(claim.storageKey !== undefined && { storage_key: claim.storageKey }),
    })
    .where('file_key', '=', claim.fileKey)
    .where('state', '=', claim.fromState)
    .where('submission_id', 'is', null)
    .where('expires_at', '>', claim.now)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export async function uploadsOfSubmission(
  db: Executor,
  submissionId: number,
): Promise<Pick<UploadRow, 'file_key' | 'storage_key'>[]> {
  return db
    .selectFrom('uploads')
    .select(['file_key', 'storage_key'])
    .where('submission_id', '=', submissionId)
    .execute();
}

/** The claimed files of these submissions that are not yet stored the way a conversion wants (sealed or not). */
export async function filesToConvert(db: Executor, submissionIds: number[], sealed: boolean): Promise<UploadRow[]> {
  if (submissionIds.length === 0) return [];
  return db
    .selectFrom('uploads')
    .selectAll()
    .where('submission_id', 'in', submissionIds)
    .where('state', '=', 'claimed')
    .where('sealed', '=', sealed ? 0 : 1)
    .execute();
}

/** Points an upload at its converted object, if it still names the object that was converted. */
export async function moveUpload(
  db: Executor,
  fileKey: string,
  from: string,
  to: string,
  sealed: boolean,
): Promise<boolean> {
  const r = await db
    .updateTable('uploads')
    .set({ storage_key: to, sealed: sealed ? 1 : 0 })
    .where('file_key', '=', fileKey)
    .where('storage_key', '=', from)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/**
 * Of these uploads, those that went straight to the bucket (presigned) and whose URL is still
 * good at now: the account, form and fileKey it PUTs to (its key, storageKey), and when it expires.
 */
export async function livePresigned(
  db: Executor,
  fileKeys: string[],
  now: number,
): Promise<Pick<UploadRow, 'account_id' | 'form_id' | 'file_key' | 'expires_at'>[]> {
  if (fileKeys.length === 0) return [];
  return db
    .selectFrom('uploads')
    .select(['account_id', 'form_id', 'file_key', 'expires_at'])
    .where('file_key', 'in', fileKeys)
    .where('via', '=', 'presigned')
    .where('expires_at', '>', now)
    .execute();
}

/**
 * Deletes the rows and returns the storage keys they held at that moment: read any earlier,
 * a conversion could move a row to a new object in between, and the new one would be missed.
 */
export async function deleteUploads(db: Executor, fileKeys: string[]): Promise<string[]> {
  if (fileKeys.length === 0) return [];
  return (await db.deleteFrom('uploads').where('file_key', 'in', fileKeys).returning('storage_key').execute()).map(
    (r) => r.storage_key,
  );
}

/** A file that a submission holds, for download. */
export async function findClaimed(
  db: Executor,
  accountId: number,
  submissionId: number,
  fileKey: string,
): Promise<UploadRow | undefined> {
  return db
    .selectFrom('uploads')
    .selectAll()
    .where('file_key', '=', fileKey)
    .where('account_id', '=', accountId)
    .where('submission_id', '=', submissionId)
    .where('state', '=', 'claimed')
    .executeTakeFirst();
}

export async function expiredUnclaimed(
  db: Executor,
  now: number,
  limit: number,
): Promise<Pick<UploadRow, 'file_key' | 'storage_key'>[]> {
  return db
    .selectFrom('uploads')
    .select(['file_key', 'storage_key'])
    .where('state', 'in', ['issued', 'receiving', 'stored'])
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .limit(limit)
    .execute();
}

/** Deletes those of the rows that are still unclaimed and expired. */
export async function deleteExpiredUnclaimed(db: Executor, fileKeys: string[], now: number): Promise<void> {
  if (fileKeys.length === 0) return;
  await db
    .deleteFrom('uploads')
    .where('file_key', 'in', fileKeys)
    .where('state', 'in', ['issued', 'receiving', 'stored'])
    .where('expires_at', '<=', now)
    .execute();
}
