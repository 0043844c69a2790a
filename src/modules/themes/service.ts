import { randomBytes } from 'node:crypto';
import type { AppContext } from '../../context.js';
import type { ThemeRow } from '../../db/schema.js';
import { transact, type Executor } from '../../db/transaction.js';
import { BadRequestError, ConflictError, invalid, NotFoundError } from '../../errors.js';
import { isoTime, page, type Page } from '../../http/schemas.js';
import type { AccountScope } from '../permissions/caller.js';
import { cssProblem } from './css.js';
import * as repo from './repository.js';
import {
  DEFAULT_COLORS,
  DEFAULT_FONT,
  DEFAULT_SPACING,
  type Theme,
  type ThemeCreate,
  type ThemeDeleted,
  type ThemeQuery,
  type ThemeStyle,
  type ThemeUpdate,
} from './schemas.js';

export interface ThemeRef {
  themeId: string;
}

export function newThemeId(): string {
  return `th_${randomBytes(12).toString('base64url')}`;
}

export function styleOf(row: Pick<ThemeRow, 'style'>): ThemeStyle {
  return JSON.parse(row.style) as ThemeStyle;
}

export function toTheme(row: ThemeRow, formsCount: number): Theme {
  const style = styleOf(row);
  return {
    id: row.id,
    name: row.name,
    isDefault: row.is_default === 1,
    lockedInUse: row.locked_in_use === 1,
    colors: { ...DEFAULT_COLORS, ...style.colors },
    fontFamily: style.fontFamily ?? DEFAULT_FONT,
    spacing: style.spacing ?? DEFAULT_SPACING,
    logoUrl: style.logoUrl ?? null,
    customCss: row.custom_css,
    formsCount,
    created: isoTime(row.created_at),
    updated: isoTime(row.updated_at),
  };
}

/** One of the account's themes, or 404: another account's answers the same as none. */
export async function requireTheme(
  db: Executor,
  { accountId }: AccountScope,
  themeId: string,
  lock = false,
): Promise<ThemeRow> {
  const theme = await repo.findTheme(db, accountId, themeId, lock);
  if (!theme) throw new NotFoundError('theme_not_found');
  return theme;
}

/**
 * The theme a form is given in a request body (property names it, for the 400): one of the
 * account's, or 400 invalid_theme (another account's answers the same as none).
 */
export async function themeForForm(
  db: Executor,
  { accountId }: AccountScope,
  themeId: string,
  property: string,
): Promise<ThemeRow> {
  // Locked: a delete of the theme waits for this form to be on it, and then moves it too.
  const theme = await repo.findTheme(db, accountId, themeId, true);
  if (!theme) throw invalid('invalid_theme', property, 'is not a theme of this account');
  return theme;
}

/**
 * The account's default theme. Accounts get it when they are made (accounts/service.ts) and
 * migration 0018 gave one to every account before it; an account without one (written
 * straight to the database) gets it here.
 */
export async function defaultTheme(db: Executor, accountId: number, now: number): Promise<ThemeRow> {
  const found = await repo.findDefaultTheme(db, accountId);
  if (found) return found;
  return insertDefaultTheme(db, accountId, now);
}

export async function insertDefaultTheme(db: Executor, accountId: number, now: number): Promise<ThemeRow> {
  return repo.insertTheme(db, {
    id: newThemeId(),
    account_id: accountId,
    name: 'Default',
    is_default: 1,
    locked_in_use: 0,
    style: '{}',
    custom_css: '',
    created_at: now,
    updated_at: now,
  });
}

/**
 * A host that a Content-Security-Policy source names as itself, as the WHATWG parser gives it
 * (lower case, IDNs in punycode, IPv4 in dotted decimal, IPv6 compressed in brackets): a DNS
 * name of letters, digits and hyphens (no label starting or ending with one, no empty label,
 * no final dot) or an IP address. The parser takes far more in a host (`*`, `;`, `,`, `'`,
 * `!`, `_`, ...), which in a policy would be a wildcard (`https://*` is every https host) or
 * would end the source list or the policy.
 */
const PLAIN_HOST =
  /^(?:(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?|\[[0-9a-f:]+\])$/;

/**
 * The origin of a logo URL a browser can load, which the page's img-src may name, or
 * undefined. The schema's uri format takes some that the WHATWG parser refuses (a port past
 * 65535, a NUL in the host, an IPv4 address past 255): such a logo would fail every page of the
 * theme's forms. And the parser takes hosts that are no plain host (PLAIN_HOST), whose origin
 * would widen or break the page's policy (`https://*`).
 */
export function logoOrigin(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined;
  if (parsed.hostname.length > 253 || !PLAIN_HOST.test(parsed.hostname) || !/^[0-9]*$/.test(parsed.port))
    return undefined;
  const origin = `${parsed.protocol}//${parsed.host}`;
  // Exactly the URL's origin, nothing else: what the policy names is what the browser loads from.
  return origin === parsed.origin ? origin : undefined;
}

function checkLogo(url: string | null | undefined): void {
  if (typeof url === 'string' && logoOrigin(url) === undefined)
    throw invalid(
      'validation_failed',
      'body.logoUrl',
      'is not an http(s) URL that a browser can load, with a plain host (a DNS name or an IP address)',
    );
}

function checkCss(ctx: AppContext, css: string | undefined): void {
  if (css === undefined) return;
  const problem = cssProblem(css, ctx.config.publicUrl);
  if (problem)
    throw new BadRequestError('invalid_css', `customCss ${problem}`, {
      details: [{ property: 'body.customCss', message: problem }],
    });
}

/** The theme's record; for a member (visibleTo), its forms counted as folders count them. */
async function recordOf(db: Executor, accountId: number, row: ThemeRow, visibleTo?: number): Promise<Theme> {
  return toTheme(row, (await repo.countFormsByTheme(db, accountId, [row], visibleTo)).get(row.id) ?? 0);
}

export async function listThemes(
  ctx: AppContext,
  { accountId }: AccountScope,
  query: ThemeQuery,
  /** A member's user id (memberOf): forms counted only where the member holds a level, as folders count them. */
  visibleTo?: number,
): Promise<Page & { themes: Theme[] }> {
  const { rows, total } = await repo.listThemes(ctx.db, accountId, {
    limit: query.pageSize,
    offset: (query.pageNumber - 1) * query.pageSize,
  });
  const counts = await repo.countFormsByTheme(ctx.db, accountId, rows, visibleTo);
  return {
    themes: rows.map((r) => toTheme(r, counts.get(r.id) ?? 0)),
    ...page(total, query.pageNumber, query.pageSize),
  };
}

export async function getTheme(
  ctx: AppContext,
  scope: AccountScope,
  { themeId }: ThemeRef,
  visibleTo?: number,
): Promise<Theme> {
  return recordOf(ctx.db, scope.accountId, await requireTheme(ctx.db, scope, themeId), visibleTo);
}

export async function createTheme(ctx: AppContext, { accountId }: AccountScope, input: ThemeCreate): Promise<Theme> {
  checkCss(ctx, input.customCss);
  checkLogo(input.logoUrl);
  const style: ThemeStyle = {};
  if (input.colors !== undefined) style.colors = input.colors;
  if (input.fontFamily !== undefined) style.fontFamily = input.fontFamily;
  if (input.spacing !== undefined) style.spacing = input.spacing;
  if (input.logoUrl !== undefined) style.logoUrl = input.logoUrl;
  return transact(ctx.db, async (trx) => {
    const now = ctx.clock.now();
    // The account's default exists before any other theme, so it stays the oldest.
    await defaultTheme(trx, accountId, now);
    const row = await repo.insertTheme(trx, {
      id: newThemeId(),
      account_id: accountId,
      name: input.name,
      is_default: 0,
      locked_in_use: Number(input.lockedInUse ?? false),
      style: JSON.stringify(style),
      custom_css: input.customCss ?? '',
      created_at: now,
      updated_at: now,
    });
    return toTheme(row, 0);
  });
}

export async function updateTheme(
  ctx: AppContext,
  scope: AccountScope,
  { themeId }: ThemeRef,
  input: ThemeUpdate,
): Promise<Theme> {
  checkCss(ctx, input.customCss);
  checkLogo(input.logoUrl);
  return transact(ctx.db, async (trx) => {
    const current = await requireTheme(trx, scope, themeId, true);
    const style = styleOf(current);
    if (input.colors !== undefined) style.colors = input.colors;
    if (input.fontFamily !== undefined) {
      if (input.fontFamily === null) delete style.fontFamily;
      else style.fontFamily = input.fontFamily;
    }
    if (input.spacing !== undefined) {
      if (input.spacing === null) delete style.spacing;
      else style.spacing = input.spacing;
    }
    if (input.logoUrl !== undefined) style.logoUrl = input.logoUrl;
    const row = await repo.updateTheme(trx, scope.accountId, themeId, {
      ...(input.name !== undefined && { name: input.name }),
      ...(input.customCss !== undefined && { custom_css: input.customCss }),
      ...(input.lockedInUse !== undefined && { locked_in_use: Number(input.lockedInUse) }),
      style: JSON.stringify(style),
      updated_at: ctx.clock.now(),
    });
    // The hosted pages of its forms show the new look: their cached definitions go.
    await repo.reviseFormsUsing(trx, scope.accountId, row);
    return recordOf(trx, scope.accountId, row);
  });
}

/**
 * Deletes a theme of the account: its forms (deleted ones too, which may be restored) move to
 * the default theme, unless the theme is locked in use and live forms use it (409). The
 * default theme is never deleted (400).
 */
export async function deleteTheme(ctx: AppContext, scope: AccountScope, { themeId }: ThemeRef): Promise<ThemeDeleted> {
  return transact(ctx.db, async (trx) => {
    const theme = await requireTheme(trx, scope, themeId, true);
    if (theme.is_default === 1) throw new BadRequestError('default_theme');
    if (theme.locked_in_use === 1) {
      const using = await repo.countAllFormsUsing(trx, scope.accountId, theme, true);
      if (using > 0)
        throw new ConflictError(
          'theme_in_use',
          `${using} form${using === 1 ? ' uses' : 's use'} this theme, which is locked in use (lockedInUse); move ${using === 1 ? 'it' : 'them'} to another theme or turn lockedInUse off first`,
        );
    }
    const now = ctx.clock.now();
    const fallback = await defaultTheme(trx, scope.accountId, now);
    const switchedForms = await repo.moveForms(trx, scope.accountId, themeId, fallback.id, now);
    await repo.deleteTheme(trx, scope.accountId, themeId);
    return { themeId, defaultThemeId: fallback.id, switchedForms };
  });
}

/** A copy of a theme (never the default one) in another account, under a new id; for subaccounts. */
export async function copyThemeRow(trx: Executor, source: ThemeRow, accountId: number, now: number): Promise<ThemeRow> {
  await defaultTheme(trx, accountId, now);
  return repo.insertTheme(trx, {
    id: newThemeId(),
    account_id: accountId,
    name: source.name,
    is_default: 0,
    locked_in_use: source.locked_in_use,
    style: source.style,
    custom_css: source.custom_css,
    created_at: now,
    updated_at: now,
  });
}
