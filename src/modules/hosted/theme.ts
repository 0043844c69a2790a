import type { FormRow } from '../../db/schema.js';
import type { Executor } from '../../db/transaction.js';
import { sheetHash, themeSheet } from '../themes/css.js';
import { findDefaultTheme, findTheme } from '../themes/repository.js';
import { logoOrigin as themeLogoOrigin, styleOf } from '../themes/service.js';

/** The theme of a hosted page (docs/themes.md): its style sheet, served at /f/{viewKey}/theme.css, and its logo. */
export interface PageTheme {
  sheet: string;
  /** Of the sheet: the page asks for theme.css?v=<hash>, which is then cached for good. */
  hash: string;
  logoUrl: string | null;
  /** The logo's origin, which the page's img-src then allows. */
  logoOrigin: string | undefined;
}

/**
 * The form's theme as its page shows it. Read with the page definition, which is kept under
 * the form's revision: a change to the theme gives its forms a new revision (themes/service.ts).
 */
export async function pageTheme(db: Executor, form: FormRow): Promise<PageTheme> {
  const row =
    (form.theme_id !== null ? await findTheme(db, form.account_id, form.theme_id) : undefined) ??
    (await findDefaultTheme(db, form.account_id));
  const style = row ? styleOf(row) : {};
  const sheet = themeSheet({ id: row?.id ?? 'default', style, customCss: row?.custom_css ?? '' });
  // A logo saved before its URL was checked as a browser reads it is left out, not a failed page.
  const logoOrigin = style.logoUrl ? themeLogoOrigin(style.logoUrl) : undefined;
  return { sheet, hash: sheetHash(sheet), logoUrl: logoOrigin ? style.logoUrl! : null, logoOrigin };
}
