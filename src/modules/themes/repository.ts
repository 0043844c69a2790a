import { permittedForms } from '../permissions/repository.js';
import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { Database, NewThemeRow, ThemeRow } from '../../db/schema.js';
import { engineOf } from '../../db/engine.js';
import { type Executor, deletedMeanwhile } from '../../db/transaction.js';

/**
 * One theme of the account. With lock (in a transaction), its row stays locked until the
 * commit (PostgreSQL; SQLite has one writer), so that a delete and a form taking the theme
 * never cross: the one that comes second sees what the first did.
 */
export async function findTheme(
  db: Executor,
  accountId: number,
  themeId: string,
  lock = false,
): Promise<ThemeRow | undefined> {
  const query = db.selectFrom('themes').selectAll().where('id', '=', themeId).where('account_id', '=', accountId);
  return (lock ? query.$call(engineOf(db).lockRows) : query).executeTakeFirst();
}

export async function findDefaultTheme(db: Executor, accountId: number): Promise<ThemeRow | undefined> {
  return db
    .selectFrom('themes')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('is_default', '=', 1)
    .executeTakeFirst();
}

/** Oldest first (the default, made with the account, leads). */
export async function listThemes(
  db: Executor,
  accountId: number,
  page: { limit: number; offset: number },
): Promise<{ rows: ThemeRow[]; total: number }> {
  const query = db.selectFrom('themes').where('account_id', '=', accountId);
  const [rows, count] = await Promise.all([
    query
      .selectAll()
      .orderBy('is_default', 'desc')
      .orderBy('created_at')
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export async function insertTheme(db: Executor, row: NewThemeRow): Promise<ThemeRow> {
  return db.insertInto('themes').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateTheme(
  db: Executor,
  accountId: number,
  themeId: string,
  update: { name?: string; style?: string; custom_css?: string; locked_in_use?: number; updated_at: number },
): Promise<ThemeRow> {
  return db
    .updateTable('themes')
    .set(update)
    .where('id', '=', themeId)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirstOrThrow(deletedMeanwhile('theme_not_found'));
}

export async function deleteTheme(db: Executor, accountId: number, themeId: string): Promise<void> {
  await db.deleteFrom('themes').where('id', '=', themeId).where('account_id', '=', accountId).execute();
}

/** The forms of the account on the theme; rows written before themes (null) are on the default. */
function usesTheme(accountId: number, theme: Pick<ThemeRow, 'id' | 'is_default'>) {
  return (eb: ExpressionBuilder<Database, 'forms'>): Expression<SqlBool> => {
    const on = eb('forms.theme_id', '=', theme.id);
    return eb.and([
      eb('forms.account_id', '=', accountId),
      theme.is_default === 1 ? eb.or([on, eb('forms.theme_id', 'is', null)]) : on,
    ]);
  };
}

/** Live forms on each theme, by theme id; with visibleTo (a member's user id), only those the member holds a level on. */
export async function countFormsByTheme(
  db: Executor,
  accountId: number,
  themes: Pick<ThemeRow, 'id' | 'is_default'>[],
  visibleTo?: number,
): Promise<Map<string, number>> {
  const counts = new Map<string, number>(themes.map((t) => [t.id, 0]));
  if (themes.length === 0) return counts;
  const rows = await db
    .selectFrom('forms')
    .select(['theme_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null)
    .$if(visibleTo !== undefined, (q) => q.where('id', 'in', permittedForms(db, visibleTo!)))
    .groupBy('theme_id')
    .execute();
  const fallback = themes.find((t) => t.is_default === 1);
  for (const r of rows) {
    const id = r.theme_id ?? fallback?.id;
    if (id !== undefined && counts.has(id)) counts.set(id, (counts.get(id) ?? 0) + Number(r.n));
  }
  return counts;
}

/** A page of the ids of live forms on the theme, by id, with their total. */
export async function formIdsUsingTheme(
  db: Executor,
  accountId: number,
  theme: Pick<ThemeRow, 'id' | 'is_default'>,
  page: { limit: number; offset: number },
): Promise<{ ids: number[]; total: number }> {
  const query = db.selectFrom('forms').where(usesTheme(accountId, theme)).where('forms.deleted_at', 'is', null);
  const [rows, count] = await Promise.all([
    query.select('forms.id').orderBy('forms.id').limit(page.limit).offset(page.offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { ids: rows.map((r) => r.id), total: Number(count.n) };
}

/** How many forms, live or deleted, use the theme. */
export async function countAllFormsUsing(
  db: Executor,
  accountId: number,
  theme: Pick<ThemeRow, 'id' | 'is_default'>,
  liveOnly: boolean,
): Promise<number> {
  let query = db.selectFrom('forms').where(usesTheme(accountId, theme));
  if (liveOnly) query = query.where('forms.deleted_at', 'is', null);
  const row = await query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The theme's forms get a new revision, so that every cached read of them (form records,
 * hosted page definitions) is built again with the theme as it now is.
 */
export async function reviseFormsUsing(
  db: Executor,
  accountId: number,
  theme: Pick<ThemeRow, 'id' | 'is_default'>,
): Promise<void> {
  await db
    .updateTable('forms')
    .set((eb) => ({ revision: eb('revision', '+', 1) }))
    .where(usesTheme(accountId, theme))
    .execute();
}

/** Moves the theme's forms (live or deleted) to another theme, with a new revision each; answers how many. */
export async function moveForms(
  db: Executor,
  accountId: number,
  from: string,
  to: string,
  now: number,
): Promise<number> {
  const result = await db
    .updateTable('forms')
    .set((eb) => ({ theme_id: to, revision: eb('revision', '+', 1), updated_at: now }))
    .where('account_id', '=', accountId)
    .where('theme_id', '=', from)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Sets one form's theme, with a new revision. */
export async function setFormTheme(
  db: Executor,
  accountId: number,
  formId: number,
  themeId: string,
  now: number,
): Promise<void> {
  await db
    .updateTable('forms')
    .set((eb) => ({ theme_id: themeId, revision: eb('revision', '+', 1), updated_at: now }))
    .where('id', '=', formId)
    .where('account_id', '=', accountId)
    .execute();
}
