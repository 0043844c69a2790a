import { randomBytes, type KeyObject } from 'node:crypto';
import { Readable } from 'node:stream';
import type { AppContext } from '../../context.js';
import { open, seal, type FormKeys } from '../../crypto/envelope.js';
import type { DocmergeDocumentRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';
import { ObjectNotFoundError } from '../../storage/types.js';
import { documentAad } from './keys.js';

/** A document's object written the other way (sealed or opened) under a new key, not yet switched to. */
export interface DocumentMove {
  id: number;
  from: string;
  to: string;
}

/** The documents of these submissions still stored the other way than `sealing` asks. */
export async function documentsToConvert(
  db: Executor,
  submissionIds: number[],
  sealing: boolean,
): Promise<DocmergeDocumentRow[]> {
  if (submissionIds.length === 0) return [];
  return db
    .selectFrom('docmerge_documents')
    .selectAll()
    .where('submission_id', 'in', submissionIds)
    .where('sealed', '=', sealing ? 0 : 1)
    .orderBy('id')
    .execute();
}

/**
 * For the background conversion after a form's encryption is turned on or off: writes a sealed
 * (publicKey given) or opened (keys given) copy of each document under a fresh key, before the
 * conversion's transaction, which then switches the rows over (commitDocumentMoves). A copy whose
 * transaction never commits stays behind unreferenced, as the files' copies do.
 */
export async function convertDocuments(
  ctx: AppContext,
  documents: DocmergeDocumentRow[],
  to: { publicKey: KeyObject } | { keys: FormKeys },
): Promise<DocumentMove[]> {
  const moves: DocumentMove[] = [];
  try {
    await convertEach(ctx, documents, to, moves);
  } catch (error) {
    // Copies written so far would never be referenced (and, opening, are in the clear).
    if (moves.length > 0) await ctx.storage.deleteMany(moves.map((m) => m.to)).catch(() => undefined);
    throw error;
  }
  return moves;
}

async function convertEach(
  ctx: AppContext,
  documents: DocmergeDocumentRow[],
  to: { publicKey: KeyObject } | { keys: FormKeys },
  moves: DocumentMove[],
): Promise<void> {
  for (const document of documents) {
    let bytes: Buffer;
    try {
      const object = await ctx.storage.get(document.storage_key);
      const chunks: Buffer[] = [];
      for await (const chunk of object.stream as AsyncIterable<Buffer>) chunks.push(chunk);
      bytes = Buffer.concat(chunks);
    } catch (error) {
      if (error instanceof ObjectNotFoundError) continue; // nothing left to convert
      throw error;
    }
    const target = `${document.storage_key.replace(/-c[A-Za-z0-9_-]+$/, '')}-c${randomBytes(6).toString('base64url')}`;
    const converted =
      'publicKey' in to
        ? seal(bytes, to.publicKey, documentAad(target))
        : open(bytes, to.keys, documentAad(document.storage_key));
    await ctx.storage.put(target, Readable.from([converted]), {
      maxBytes: converted.length,
      contentType: 'publicKey' in to ? 'application/octet-stream' : document.content_type,
    });
    moves.push({ id: document.id, from: document.storage_key, to: target });
  }
}

/** In the conversion's transaction: the documents point at their new objects; returns the keys no longer used. */
export async function commitDocumentMoves(db: Executor, moves: DocumentMove[], sealed: boolean): Promise<string[]> {
  const unused: string[] = [];
  for (const move of moves) {
    const moved = await db
      .updateTable('docmerge_documents')
      .set({ storage_key: move.to, sealed: sealed ? 1 : 0 })
      .where('id', '=', move.id)
      .where('storage_key', '=', move.from)
      .executeTakeFirst();
    unused.push(Number(moved.numUpdatedRows) > 0 ? move.from : move.to);
  }
  return unused;
}
