import type { AppContext } from '../../context.js';
import type { Kdf } from '../../crypto/hasher.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, NotFoundError } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import { createSubaccountOf } from '../accounts/service.js';
import * as formsRepo from '../forms/repository.js';
import type { Form } from '../forms/schemas.js';
import { copyFormIntoAccount, toForm } from '../forms/service.js';
import type { AccountScope } from '../permissions/caller.js';
import * as themesRepo from '../themes/repository.js';
import type { Theme, ThemeDeleted } from '../themes/schemas.js';
import * as themes from '../themes/service.js';
import * as repo from './repository.js';
import type { FormCopyQuery, PageQuery, Subaccount, SubaccountCreate, ThemeAssignment } from './schemas.js';

/**
 * Subaccounts: accounts that belong to another (the parent), each a full account of its own
 * (users, forms, themes, tokens). The parent's owner and admins reach a subaccount's data only
 * through the /subaccount routes; a subaccount that is not the caller's answers 404.
 */

export interface SubaccountRef {
  subaccountId: number;
}

function toSubaccount(row: repo.SubaccountRow, formsCount: number): Subaccount {
  return {
    id: row.id,
    name: row.name,
    owner: { id: row.owner_id, email: row.owner_email, name: row.owner_name },
    formsCount,
    created: isoTime(row.created_at),
  };
}

/** The subaccount of the caller's account, as the scope its data is reached in; 404 otherwise. */
async function requireSubaccount(
  db: Executor,
  { accountId }: AccountScope,
  { subaccountId }: SubaccountRef,
): Promise<AccountScope & { row: repo.SubaccountRow }> {
  const row = await repo.findSubaccount(db, accountId, subaccountId);
  if (!row) throw new NotFoundError('subaccount_not_found');
  return { accountId: row.id, row };
}

export async function listSubaccounts(
  ctx: AppContext,
  { accountId }: AccountScope,
  query: PageQuery,
): Promise<Page & { subaccounts: Subaccount[] }> {
  const { rows, total } = await repo.listSubaccounts(ctx.db, accountId, {
    limit: query.pageSize,
    offset: (query.pageNumber - 1) * query.pageSize,
  });
  const counts = await repo.countLiveForms(
    ctx.db,
    rows.map((r) => r.id),
  );
  return {
    subaccounts: rows.map((r) => toSubaccount(r, counts.get(r.id) ?? 0)),
    ...page(total, query.pageNumber, query.pageSize),
  };
}

/**
 * A new subaccount of the caller's account, with its owner (no token is made here: the
 * parent reaches it through these routes; `formwork admin create-token` or a sign-in with the
 * password gives its owner one) and its default theme.
 */
export async function createSubaccount(
  ctx: AppContext,
  { accountId }: AccountScope,
  input: SubaccountCreate,
  kdf: Kdf,
): Promise<Subaccount> {
  const created = await createSubaccountOf(ctx, accountId, input, kdf);
  const row = await repo.findSubaccount(ctx.db, accountId, created.accountId);
  if (!row) throw new Error('the new subaccount was not found');
  return toSubaccount(row, 0);
}

export async function copyForm(
  ctx: AppContext,
  scope: AccountScope,
  { subaccountId, formId }: SubaccountRef & { formId: number },
  query: FormCopyQuery,
): Promise<Form> {
  return transact(ctx.db, async (trx) => {
    const sub = await requireSubaccount(trx, scope, { subaccountId });
    return copyFormIntoAccount(ctx, trx, scope, { formId }, sub.accountId, query.withIntegrations);
  });
}

export async function copyTheme(
  ctx: AppContext,
  scope: AccountScope,
  { subaccountId, themeId }: SubaccountRef & themes.ThemeRef,
): Promise<{ themeId: string }> {
  return transact(ctx.db, async (trx) => {
    const sub = await requireSubaccount(trx, scope, { subaccountId });
    const source = await themes.requireTheme(trx, scope, themeId);
    const copy = await themes.copyThemeRow(trx, source, sub.accountId, ctx.clock.now());
    return { themeId: copy.id };
  });
}

export async function assignTheme(
  ctx: AppContext,
  scope: AccountScope,
  { subaccountId, formId }: SubaccountRef & { formId: number },
  input: ThemeAssignment,
): Promise<{ formId: number; themeId: string }> {
  return transact(ctx.db, async (trx) => {
    const sub = await requireSubaccount(trx, scope, { subaccountId });
    const live = await formsRepo.findForm(trx, sub.accountId, formId);
    if (!live) {
      const deleted = await formsRepo.findForm(trx, sub.accountId, formId, true);
      if (!deleted) throw new NotFoundError('form_not_found');
      throw new BadRequestError('invalid_form', 'The form is deleted; restore it before giving it a theme');
    }
    const theme = await themes.themeForForm(trx, sub, input.themeId, 'body.themeId');
    await themesRepo.setFormTheme(trx, sub.accountId, formId, theme.id, ctx.clock.now());
    return { formId, themeId: theme.id };
  });
}

export async function listThemes(
  ctx: AppContext,
  scope: AccountScope,
  ref: SubaccountRef,
  query: PageQuery,
): Promise<Page & { themes: Theme[] }> {
  const sub = await requireSubaccount(ctx.db, scope, ref);
  return themes.listThemes(ctx, sub, query);
}

export async function deleteTheme(
  ctx: AppContext,
  scope: AccountScope,
  { subaccountId, themeId }: SubaccountRef & themes.ThemeRef,
): Promise<ThemeDeleted> {
  const sub = await requireSubaccount(ctx.db, scope, { subaccountId });
  return themes.deleteTheme(ctx, sub, { themeId });
}

export async function formsUsingTheme(
  ctx: AppContext,
  scope: AccountScope,
  { subaccountId, themeId }: SubaccountRef & themes.ThemeRef,
  query: PageQuery,
): Promise<Page & { forms: Form[] }> {
  const sub = await requireSubaccount(ctx.db, scope, { subaccountId });
  const theme = await themes.requireTheme(ctx.db, sub, themeId);
  const { ids, total } = await themesRepo.formIdsUsingTheme(ctx.db, sub.accountId, theme, {
    limit: query.pageSize,
    offset: (query.pageNumber - 1) * query.pageSize,
  });
  const rows = await formsRepo.findFormsByIds(ctx.db, sub.accountId, ids);
  rows.sort((x, y) => x.id - y.id);
  return { forms: rows.map((r) => toForm(ctx, r)), ...page(total, query.pageNumber, query.pageSize) };
}
