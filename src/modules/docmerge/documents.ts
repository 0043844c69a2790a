import type { DocmergeDocumentRow } from '../../db/schema.js';
import { isoTime } from '../../http/schemas.js';
import type { GeneratedDocument } from './schemas.js';

/** A made document as a submission's detailed record lists it. */
export function toGeneratedDocument(row: DocmergeDocumentRow): GeneratedDocument {
  return {
    id: row.id,
    integrationId: row.integration_id,
    name: row.file_name,
    contentType: row.content_type,
    size: row.size,
    created: isoTime(row.created_at),
  };
}
