import { Type, type Static } from '@sinclair/typebox';
import { PageNumber, PageSize, Timestamp, listBody } from '../../http/schemas.js';

/** Theme ids are strings: th_ and 16 URL-safe characters (DESIGN: themeId is a string). */
export const THEME_ID_PATTERN = '^th_[A-Za-z0-9_-]{16}$';
export const ThemeId = Type.String({
  pattern: THEME_ID_PATTERN,
  maxLength: 19,
  description: 'A theme id: th_ and 16 URL-safe characters',
});
export const themeParams = Type.Object({ themeId: ThemeId }, { additionalProperties: false });

/** How much custom CSS one theme holds. */
export const MAX_CUSTOM_CSS = 20_000;

export const COLOR_PATTERN = '^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$';
const color = (description: string) => Type.String({ pattern: COLOR_PATTERN, maxLength: 9, description });

export const ThemeColors = Type.Object(
  {
    primary: Type.Optional(color('Buttons, focus rings, the bar above the form; default #2557d6')),
    background: Type.Optional(color('The page around the form; default #f3f5f9')),
    card: Type.Optional(color('The card that holds the form; default #ffffff')),
    text: Type.Optional(color('Text; default #1c2333')),
    muted: Type.Optional(color('Hints and secondary text; default #5b6475')),
    border: Type.Optional(color('Input borders; default #cfd5e0')),
  },
  { additionalProperties: false, title: 'ThemeColors', description: 'Hex colours (#rgb, #rrggbb or #rrggbbaa)' },
);
export type ThemeColors = Static<typeof ThemeColors>;

export const DEFAULT_COLORS: Required<ThemeColors> = {
  primary: '#2557d6',
  background: '#f3f5f9',
  card: '#ffffff',
  text: '#1c2333',
  muted: '#5b6475',
  border: '#cfd5e0',
};
export const DEFAULT_FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
export const DEFAULT_SPACING = 22;

const name = Type.String({ minLength: 1, maxLength: 200 });
/**
 * A font stack: names separated by commas (spaces around them allowed), each either words of
 * letters, digits and hyphens with spaces between (Arial, Segoe UI, sans-serif) or one string
 * of them in matching quotes ("Segoe UI", 'Inter'), with no quote inside. Whatever matches is
 * written into the theme sheet as it is (css.ts), so a quote left open must not match.
 */
const FONT_WORDS = '[A-Za-z0-9-]+(?: +[A-Za-z0-9-]+)*';
const FONT_NAME = `(?:${FONT_WORDS}|"[A-Za-z0-9 -]+"|'[A-Za-z0-9 -]+')`;
export const FONT_FAMILY_PATTERN = `^ *${FONT_NAME} *(?:, *${FONT_NAME} *)*$`;
export const FONT_FAMILY_MAX = 300;
const fontFamily = Type.String({
  minLength: 1,
  maxLength: FONT_FAMILY_MAX,
  pattern: FONT_FAMILY_PATTERN,
  description: `A CSS font stack: names separated by commas, each either words (letters, digits, hyphens) or one name in matching quotes, without quotes inside; default ${DEFAULT_FONT}`,
});
export const MAX_SPACING = 64;
const spacing = Type.Integer({
  minimum: 0,
  maximum: MAX_SPACING,
  description: `Pixels between fields; default ${DEFAULT_SPACING}`,
});
const logoUrl = Type.Union([Type.String({ format: 'uri', maxLength: 2000, pattern: '^https?://' }), Type.Null()], {
  description:
    "An http(s) image shown above the form title, by a URL that a browser's parser accepts, whose host is a plain DNS name or an IP address (400 otherwise: no * or other characters); null for none (the default)",
});
const customCss = Type.String({
  maxLength: MAX_CUSTOM_CSS,
  description:
    'CSS added after the theme on the hosted page. Refused (400 invalid_css) when it holds url() to another host, ' +
    '@import, expression(), javascript:, behavior, -moz-binding or </style (after CSS escapes and comments are read); ' +
    'url() to the service itself, a relative path or data: is fine. docs/themes.md',
});
const lockedInUse = Type.Boolean({
  description:
    'While forms use the theme, deleting it is refused (409 theme_in_use) rather than moving them to the default theme; default false',
});

export const ThemeCreate = Type.Object(
  {
    name,
    colors: Type.Optional(ThemeColors),
    fontFamily: Type.Optional(fontFamily),
    spacing: Type.Optional(spacing),
    logoUrl: Type.Optional(logoUrl),
    customCss: Type.Optional(customCss),
    lockedInUse: Type.Optional(lockedInUse),
  },
  { additionalProperties: false, title: 'ThemeCreate' },
);
export type ThemeCreate = Static<typeof ThemeCreate>;

export const ThemeUpdate = Type.Object(
  {
    name: Type.Optional(name),
    colors: Type.Optional(Type.Union([ThemeColors], { description: 'Replaces the colours as a whole' })),
    fontFamily: Type.Optional(Type.Union([fontFamily, Type.Null()], { description: 'null goes back to the default' })),
    spacing: Type.Optional(Type.Union([spacing, Type.Null()], { description: 'null goes back to the default' })),
    logoUrl: Type.Optional(logoUrl),
    customCss: Type.Optional(customCss),
    lockedInUse: Type.Optional(lockedInUse),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'ThemeUpdate',
    description: 'Only the properties sent change',
  },
);
export type ThemeUpdate = Static<typeof ThemeUpdate>;

/** What a theme's style column holds (JSON): only what was set; the defaults fill the rest. */
export interface ThemeStyle {
  colors?: ThemeColors;
  fontFamily?: string;
  spacing?: number;
  logoUrl?: string | null;
}

export const Theme = Type.Object(
  {
    id: ThemeId,
    name: Type.String(),
    isDefault: Type.Boolean({
      description: "The account's default theme: new forms take it, and it cannot be deleted",
    }),
    lockedInUse: Type.Boolean(),
    colors: Type.Object(
      {
        primary: Type.String(),
        background: Type.String(),
        card: Type.String(),
        text: Type.String(),
        muted: Type.String(),
        border: Type.String(),
      },
      { description: 'Every colour, the defaults filled in' },
    ),
    fontFamily: Type.String(),
    spacing: Type.Integer(),
    logoUrl: Type.Union([Type.String(), Type.Null()]),
    customCss: Type.String(),
    formsCount: Type.Integer({
      description: 'Live forms of the account that use the theme; for a member, only those the member holds a level on',
    }),
    created: Timestamp,
    updated: Timestamp,
  },
  { $id: 'Theme', title: 'Theme' },
);
export type Theme = Static<typeof Theme>;

export const ThemeQuery = Type.Object({ pageNumber: PageNumber, pageSize: PageSize }, { additionalProperties: false });
export type ThemeQuery = Static<typeof ThemeQuery>;

export const ThemeList = listBody('themes', Type.Ref(Theme));

export const ThemeDeleted = Type.Object(
  {
    themeId: ThemeId,
    defaultThemeId: ThemeId,
    switchedForms: Type.Integer({ description: 'Forms (live or deleted) moved to the default theme' }),
  },
  { description: 'The theme is gone; the forms that used it now use the default theme', title: 'ThemeDeleted' },
);
export type ThemeDeleted = Static<typeof ThemeDeleted>;
