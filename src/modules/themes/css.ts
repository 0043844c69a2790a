import { createHash } from 'node:crypto';
import {
  COLOR_PATTERN,
  DEFAULT_COLORS,
  DEFAULT_FONT,
  DEFAULT_SPACING,
  FONT_FAMILY_MAX,
  FONT_FAMILY_PATTERN,
  MAX_SPACING,
  type ThemeColors,
  type ThemeStyle,
} from './schemas.js';

/**
 * The custom CSS of themes, checked when it is written (never rewritten: a refusal names the
 * rule it breaks), and the style sheet of a theme that the hosted page loads.
 *
 * The check reads the CSS as a browser would before looking: comments go, and escapes
 * (\75 rl, \@import) are decoded, so that no spelling of a refused construct gets through.
 * Refused: @import; url() (and image-set() strings) that reach another host or another scheme
 * than http(s) and data:; expression(); javascript: and vbscript:; behavior and -moz-binding;
 * and </style (or <!--, -->), which could close the sheet if it were ever inlined. The pages'
 * Content-Security-Policy (style-src, img-src and font-src) would block most of these anyway;
 * this keeps them out of the data.
 */

/**
 * What the CSS would read as after comments are removed and escapes decoded, lower case.
 * Comments become a space, or (joined) nothing: old browsers read expr/ ** /ession as one word.
 * Comments are found as a browser finds them, outside strings and escapes, before decoding:
 * "/*" in one string and "* /" in another are no comment, and hide nothing between them.
 */
export function normalizeCss(css: string, joined = false): string {
  const decoded = withoutComments(css, joined ? '' : ' ').replace(
    /\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|\r\n|([\s\S]))/g,
    (_m, hex?: string, ch?: string) => {
      if (hex !== undefined) {
        const code = parseInt(hex, 16);
        return code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)
          ? '\ufffd'
          : String.fromCodePoint(code);
      }
      return ch ?? '';
    },
  );
  return decoded.toLowerCase();
}

/** The CSS with each comment replaced, skipping strings (to their quote or line's end) and escapes. */
function withoutComments(css: string, replacement: string): string {
  let out = '';
  let kept = 0;
  let i = 0;
  while (i < css.length) {
    const c = css[i];
    if (c === '\\') i += 2;
    else if (c === '"' || c === "'") {
      i++;
      while (i < css.length && css[i] !== c && css[i] !== '\n') i += css[i] === '\\' ? 2 : 1;
      i++;
    } else if (c === '/' && css[i + 1] === '*') {
      const end = css.indexOf('*/', i + 2);
      out += css.slice(kept, i) + replacement;
      i = kept = end === -1 ? css.length : end + 2;
    } else i++;
  }
  return out + css.slice(kept);
}

/** Whether a url() target stays on this service (or is inline data). */
function allowedTarget(raw: string, publicOrigin: string): boolean {
  // As a browser's URL parser reads it: tabs and line breaks anywhere removed, control
  // characters and spaces at either end dropped ("\\1//host" and "h\\9ttp:" reach another host).
  const target = raw
    .trim()
    .replace(/^['"]|['"]$/g, '')
    .replace(/[\t\n\r]/g, '')
    // eslint-disable-next-line no-control-regex
    .replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '');
  if (target === '') return true;
  if (target.startsWith('data:')) return true;
  // Protocol-relative (//host) reaches another host; backslashes count as slashes in URLs.
  if (/^[\\/]{2}/.test(target)) return false;
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(target);
  if (!scheme) return true; // a relative path on this service
  if (scheme[1] !== 'http' && scheme[1] !== 'https') return false;
  try {
    return new URL(target).origin === publicOrigin;
  } catch {
    return false;
  }
}

/** CSS newlines, which end a string (unescaped, they make it a bad string). */
const NEWLINE = /[\n\r\f]/;
/** An unquoted url( (its target the token up to ")"), matched where a scan stands. */
const UNQUOTED_URL = /url\s*\(\s*(?=[^\s"'])/y;

/**
 * The strings and url() targets in an image-set() argument that starts at start (just past its
 * "("), read to the ")" that closes it (end, its index): strings of either quote kind (a
 * backslash escapes the next character), comments, and the parentheses of nested functions
 * (type(), url()) as a browser reads them. Undefined when it is not well formed (a string,
 * url(), comment or the argument itself left open, or a url() that a browser reads as a bad
 * URL): refused rather than guessed at.
 */
function imageSetArgument(text: string, start: number): { targets: string[]; end: number } | undefined {
  const targets: string[] = [];
  let depth = 1;
  let i = start;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '\\') {
      i += 2;
      continue;
    }
    if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      if (end === -1) return undefined;
      i = end + 2;
      continue;
    }
    if (c === '"' || c === "'") {
      const end = stringEnd(text, i);
      if (end === undefined) return undefined;
      targets.push(text.slice(i + 1, end));
      i = end + 1;
      continue;
    }
    if (c === 'u') {
      UNQUOTED_URL.lastIndex = i;
      if (UNQUOTED_URL.test(text)) {
        // One token up to its ")", which a quote or "(" in it makes a bad URL.
        const from = UNQUOTED_URL.lastIndex;
        let j = from;
        while (j < text.length && text[j] !== ')') {
          if (/["'(]/.test(text[j]!)) return undefined;
          j += text[j] === '\\' ? 2 : 1;
        }
        if (j >= text.length) return undefined;
        targets.push(text.slice(from, j));
        i = j + 1;
        continue;
      }
    }
    if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return { targets, end: i };
    i++;
  }
  return undefined;
}

/** The index of the quote that closes the string whose opening quote is at open; undefined if it is left open. */
function stringEnd(text: string, open: number): number | undefined {
  const quote = text[open];
  let i = open + 1;
  while (i < text.length && text[i] !== quote) {
    if (NEWLINE.test(text[i]!)) return undefined;
    i += text[i] === '\\' ? 2 : 1;
  }
  return i < text.length ? i : undefined;
}

/** The first rule the CSS breaks, for a person, or undefined when it is fine. */
export function cssProblem(css: string, publicUrl: string): string | undefined {
  const origin = new URL(publicUrl).origin.toLowerCase();
  for (const text of [css.toLowerCase(), normalizeCss(css), normalizeCss(css, true)]) {
    const problem = problemIn(text, origin);
    if (problem) return problem;
  }
  return undefined;
}

function problemIn(text: string, origin: string): string | undefined {
  if (text.includes('</style')) return 'must not hold </style';
  if (text.includes('<!--') || text.includes('-->')) return 'must not hold <!-- or -->';
  if (/@import\b/.test(text)) return 'must not use @import';
  if (/expression\s*\(/.test(text)) return 'must not use expression()';
  if (/(java|vb)script\s*:/.test(text)) return 'must not use javascript: or vbscript: URLs';
  if (/(^|[^a-z-])behavior\s*:/.test(text) || text.includes('-moz-binding'))
    return 'must not use behavior or -moz-binding';
  for (const m of text.matchAll(/url\s*\(\s*("[^"]*"|'[^']*'|[^)]*)\)?/g)) {
    if (!allowedTarget(m[1] ?? '', origin))
      return `url() may only point at this service (${origin}), a relative path or data:, not ${(m[1] ?? '').trim().slice(0, 100)}`;
  }
  // image-set() and -webkit-image-set() take bare strings as URLs: every string and url() in
  // the whole argument (to the matching parenthesis; strings, escapes, comments and nested
  // functions such as type("image/png") read as a browser reads them) must stay here.
  // An image-set() inside one already read was read with it (and reading it again would make
  // nested ones quadratic).
  let readTo = -1;
  for (const m of text.matchAll(/image-set\s*\(/g)) {
    if (m.index < readTo) continue;
    const argument = imageSetArgument(text, m.index + m[0].length);
    if (argument === undefined)
      return 'image-set() must be well formed: its strings, url()s, comments and parentheses closed';
    readTo = argument.end;
    for (const target of argument.targets)
      if (!allowedTarget(target, origin))
        return `image-set() may only point at this service (${origin}), a relative path or data:, not ${target.trim().slice(0, 100)}`;
  }
  return undefined;
}

const FONT_FAMILY = new RegExp(FONT_FAMILY_PATTERN, 'u');
const COLOR = new RegExp(COLOR_PATTERN, 'u');

/** Whether a font stack is one the schema takes (schemas.ts): names, each quoted in matching quotes or not. */
export function fontFamilyWellFormed(font: string): boolean {
  return font.length <= FONT_FAMILY_MAX && FONT_FAMILY.test(font);
}

/**
 * The colours a sheet may write: those the schema takes. A value stored before a check (or
 * written past the API) that could end the :root block is left to its default, as a font that
 * is not well formed is, rather than breaking the sheet.
 */
function sheetColors(colors: ThemeColors | undefined): ThemeColors {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(colors ?? {}))
    if (key in DEFAULT_COLORS && typeof value === 'string' && COLOR.test(value)) out[key] = value;
  return out;
}

/** The theme's style sheet: its look as CSS custom properties and the rules that use them, then its custom CSS. */
export function themeSheet(theme: { id: string; style: ThemeStyle; customCss: string }): string {
  const { colors, fontFamily, spacing: space } = theme.style;
  const c = { ...DEFAULT_COLORS, ...sheetColors(colors) };
  const font = typeof fontFamily === 'string' && fontFamilyWellFormed(fontFamily) ? fontFamily : DEFAULT_FONT;
  const spacing =
    typeof space === 'number' && Number.isInteger(space) && space >= 0 && space <= MAX_SPACING
      ? space
      : DEFAULT_SPACING;
  const sheet = `/* Formwork theme ${theme.id} */
:root { --fw-accent: ${c.primary}; --fw-accent-dark: color-mix(in srgb, ${c.primary} 80%, #000); --fw-bg: ${c.background}; --fw-card: ${c.card}; --fw-text: ${c.text}; --fw-muted: ${c.muted}; --fw-line: ${c.border}; --fw-font: ${font}; --fw-spacing: ${spacing}px; }
.fw-body { font-family: var(--fw-font); }
.fw-card { background: var(--fw-card); }
.fw-field { margin-bottom: var(--fw-spacing); }
.fw-logo { display: block; max-width: 100%; max-height: 5rem; margin: 0 0 1rem; }
`;
  return theme.customCss.trim() === '' ? sheet : `${sheet}/* custom CSS */\n${theme.customCss}\n`;
}

export function sheetHash(sheet: string): string {
  return createHash('sha256').update(sheet).digest('hex').slice(0, 16);
}
