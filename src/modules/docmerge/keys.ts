import type { DocmergeIntegrationRow } from '../../db/schema.js';
import type { TemplateKind } from './template.js';

/** Where a document is kept: one key per submission and integration, so a repeated run writes the same object. */
export function documentStorageKey(
  row: Pick<DocmergeIntegrationRow, 'account_id' | 'form_id' | 'id'>,
  submissionId: number,
  kind: TemplateKind,
): string {
  return `a${row.account_id}/f${row.form_id}/documents/s${submissionId}-i${row.id}-${kind}`;
}

/** Binds a sealed document to its storage key, so that objects swapped between documents do not open. */
export function documentAad(storageKey: string): string {
  return `formwork document ${storageKey}`;
}
