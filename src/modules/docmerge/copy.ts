import type { Executor } from '../../db/transaction.js';
import type { Mapping } from './data.js';
import * as repo from './repository.js';

/**
 * Gives the form `to` a copy of each document-merge integration of the form `from`, for
 * POST /forms/{formId}/copy?includeIntegrations=true and copies into a subaccount. fieldIds
 * maps the original's field ids to the copy's: the mapping and the conditions are pointed at
 * the copied fields, and a tag that named a field by id (`12`, `field_12`) is mapped to the
 * copy of that field. A copy has made no documents and has an empty run log. Kept apart from
 * service.ts so that the forms service can call it without an import cycle.
 */
export async function copyIntegrations(
  db: Executor,
  accountId: number,
  from: number,
  to: number,
  fieldIds: ReadonlyMap<number, number>,
  now: number,
  toAccountId = accountId,
): Promise<void> {
  for (const info of await repo.listIntegrations(db, accountId, from)) {
    const source = (await repo.findIntegrationWithTemplate(db, info.id))!;
    const mapping = JSON.parse(source.mapping) as Mapping;
    const copied: Mapping = {};
    for (const [tag, id] of Object.entries(mapping)) copied[tag] = id === null ? null : (fieldIds.get(id) ?? id);
    for (const tag of JSON.parse(source.tags) as string[]) {
      const byId = /^(?:field_)?(\d+)$/i.exec(tag.trim());
      if (byId && !Object.hasOwn(copied, tag) && fieldIds.has(Number(byId[1])))
        copied[tag] = fieldIds.get(Number(byId[1]))!;
    }
    const logic = source.logic === null ? null : (JSON.parse(source.logic) as { checks: { field: number }[] });
    if (logic) logic.checks = logic.checks.map((c) => ({ ...c, field: fieldIds.get(c.field) ?? c.field }));
    const { id: _id, ...row } = source;
    await repo.insertIntegration(db, {
      ...row,
      account_id: toAccountId,
      form_id: to,
      mapping: JSON.stringify(copied),
      logic: logic === null ? null : JSON.stringify(logic),
      created_at: now,
      updated_at: now,
    });
  }
}
