import type { Executor } from '../../db/transaction.js';
import { invalid, NotFoundError } from '../../errors.js';
import { findList, optionsOfLists } from '../smartlists/repository.js';
import type { FieldDefinition } from './definition.js';

type Options = FieldDefinition['options'];

const sameOptions = (a: Options, b: Options): boolean =>
  a.length === b.length && a.every((o, i) => o.label === b[i]!.label && o.value === b[i]!.value);

/**
 * A definition whose smartList names a list takes that list's current options, so that the
 * checks of checkDefinition (the default value among them) see what the field will show. The
 * list must be one of the account's (404 otherwise, as for any id of another account), and
 * options sent with it (`sent`, the request's own) are refused unless they are the list's own,
 * as a record of the field shows them: others would be silently dropped, while a record read
 * and sent back as it is (a v2 client's round trip) must be taken.
 */
export async function withSmartListOptions(
  db: Executor,
  accountId: number,
  def: FieldDefinition,
  path: string,
  sent: Options | undefined,
): Promise<FieldDefinition> {
  if (def.smartList === null) return def;
  if (!(await findList(db, accountId, def.smartList))) throw new NotFoundError('smart_list_not_found');
  const options = (await optionsOfLists(db, [def.smartList])).get(def.smartList) ?? [];
  if (sent !== undefined && sent.length > 0 && !sameOptions(sent, options))
    throw invalid('invalid_field', `${path}.options`, 'a field that uses a smart list takes its options from it');
  return { ...def, options };
}
