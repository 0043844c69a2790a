import { createHash } from 'node:crypto';
import { DEFAULT_COLORS, DEFAULT_FONT, DEFAULT_SPACING, type ThemeStyle } from './schemas.js';

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
  // image-set() and -webkit-image-set() take bare strings as URLs.
  for (const m of text.matchAll(/image-set\s*\(([^)]*)\)/g)) {
    for (const s of (m[1] ?? '').matchAll(/"([^"]*)"|'([^']*)'/g)) {
      const target = s[1] ?? s[2] ?? '';
      if (!allowedTarget(target, origin))
        return `image-set() may only point at this service (${origin}), a relative path or data:, not ${target.slice(0, 100)}`;
    }
  }
  return undefined;
}

/** The theme's style sheet: its look as CSS custom properties and the rules that use them, then its custom CSS. */
export function themeSheet(theme: { id: string; style: ThemeStyle; customCss: string }): string {
  const c = { ...DEFAULT_COLORS, ...theme.style.colors };
  const font = theme.style.fontFamily ?? DEFAULT_FONT;
  const spacing = theme.style.spacing ?? DEFAULT_SPACING;
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
