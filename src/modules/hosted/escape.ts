const SPECIAL = /[&<>"'`]/;

/**
 * Escaping for the hosted pages. Every text that an owner or a visitor wrote (labels,
 * descriptions, options, defaults, prefilled and resumed values, messages) goes through
 * escapeHtml, in text and in quoted attributes alike: & < > " ' and ` become numeric
 * character references (`&` is `&#38;`). A page may escape 100,000 option labels and values:
 * a text without any of them (most) comes back as it is after one scan, and one with some is
 * copied in slices between them, with no callback per match.
 */
export function escapeHtml(text: string): string {
  const first = text.search(SPECIAL);
  if (first === -1) return text;
  let out = text.slice(0, first);
  let last = first;
  for (let i = first; i < text.length; i++) {
    let entity: string;
    switch (text.charCodeAt(i)) {
      case 38:
        entity = '&#38;';
        break;
      case 60:
        entity = '&#60;';
        break;
      case 62:
        entity = '&#62;';
        break;
      case 34:
        entity = '&#34;';
        break;
      case 39:
        entity = '&#39;';
        break;
      case 96:
        entity = '&#96;';
        break;
      default:
        continue;
    }
    out += text.slice(last, i) + entity;
    last = i + 1;
  }
  return out + text.slice(last);
}

/** JSON inside <script type="application/json">: no sequence in it can close the element. */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Plain text as paragraphs (blank lines) and line breaks. */
export function paragraphs(text: string): string {
  return text
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter((p) => p !== '')
    .map((p) => `<p>${escapeHtml(p).replace(/\n/g, '<br>')}</p>`)
    .join('');
}

const ALLOWED_TAGS = new Set([
  'a',
  'b',
  'blockquote',
  'br',
  'div',
  'em',
  'h2',
  'h3',
  'h4',
  'hr',
  'i',
  'li',
  'ol',
  'p',
  'span',
  'strong',
  'u',
  'ul',
]);
const VOID_TAGS = new Set(['br', 'hr']);

/**
 * The HTML of richtext and embed fields, reduced to a few formatting tags without attributes
 * (links keep an http, https or mailto href). Anything else, <script> and event handlers
 * included, is shown as text. Unclosed tags are closed at the end, so nothing leaks into
 * the rest of the page.
 */
export function sanitizeHtml(html: string): string {
  const out: string[] = [];
  const open: string[] = [];
  const tag = /<(\/?)([a-zA-Z][a-zA-Z0-9]*)((?:\s+[a-zA-Z-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>=`]+))?)*)\s*\/?>/g;
  let last = 0;
  for (let m = tag.exec(html); m; m = tag.exec(html)) {
    out.push(escapeHtml(html.slice(last, m.index)));
    last = tag.lastIndex;
    const name = m[2]!.toLowerCase();
    if (!ALLOWED_TAGS.has(name)) {
      out.push(escapeHtml(m[0]));
      continue;
    }
    if (m[1] === '/') {
      const at = open.lastIndexOf(name);
      if (at === -1) continue;
      while (open.length > at) out.push(`</${open.pop()!}>`);
      continue;
    }
    if (VOID_TAGS.has(name)) {
      out.push(`<${name}>`);
      continue;
    }
    let attrs = '';
    if (name === 'a') {
      const href = /\shref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>=`]+))/i.exec(m[3] ?? '');
      const url = (href?.[1] ?? href?.[2] ?? href?.[3] ?? '').trim();
      if (/^(https?:|mailto:)/i.test(url)) attrs = ` href="${escapeHtml(url)}" rel="noopener noreferrer nofollow"`;
    }
    out.push(`<${name}${attrs}>`);
    open.push(name);
  }
  out.push(escapeHtml(html.slice(last)));
  while (open.length > 0) out.push(`</${open.pop()!}>`);
  return out.join('');
}
