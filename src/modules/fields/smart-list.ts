import type { Executor } from '../../db/transaction.js';
import { invalid, NotFoundError } from '../../errors.js';
import { findList, optionsOfLists } from '../smartlists/repository.js';
import type { FieldDefinition } from './definition.js';

/**
 * A definition whose smartList names a list takes that list's current options, so that the
 * checks of checkDefinition (the default value among them) see what the field will show. The
 * list must be one of the account's (404 otherwise, as for any id of another account), and
 * options sent with it are refused: they would be silently dropped.
 */
export async function withSmartListOptions(
  db: Executor,
  accountId: number,
  def: FieldDefinition,
  path: string,
  optionsSent: boolean,
): Promise<FieldDefinition> {
  if (def.smartList === null) return def;
  if (!(await findList(db, accountId, def.smartList))) throw new NotFoundError('smart_list_not_found');
  if (optionsSent)
    throw invalid('invalid_field', `${path}.options`, 'a field that uses a smart list takes its options from it');
  const options = (await optionsOfLists(db, [def.smartList])).get(def.smartList) ?? [];
  return { ...def, options };
}
