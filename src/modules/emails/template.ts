import { Liquid, Tag, type Template, type TagToken, type TopLevelToken } from 'liquidjs';
import type { ErrorDetail } from '../../errors.js';

/**
 * Emails' subjects and messages are Liquid templates (LiquidJS: no code runs, only its own
 * tags and filters). Templates come from form editors and values from anyone who submits, so:
 * includes and layouts are refused (they would read files), unknown filters are refused when
 * the template is saved, and a render has limits of time and memory.
 */
const liquid = new Liquid({
  strictFilters: true,
  ownPropertyOnly: true,
  templates: {},
  parseLimit: 200_000,
  renderLimit: 2_000,
  memoryLimit: 20_000_000,
});

for (const name of ['include', 'render', 'layout']) {
  liquid.registerTag(
    name,
    class extends Tag {
      constructor(token: TagToken, remain: TopLevelToken[], engine: Liquid) {
        super(token, remain, engine);
        throw new Error(`the ${name} tag is not available in emails`);
      }
      // Never reached: the constructor refuses every use of the tag when the template is parsed.
      *render(): Generator<unknown, void, unknown> {}
    },
  );
}

/** Why the template does not parse, or undefined when it does. */
export function templateProblem(source: string): string | undefined {
  try {
    liquid.parse(source);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

export function templateProblems(sources: Record<string, string | undefined>): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  for (const [property, source] of Object.entries(sources)) {
    if (source === undefined) continue;
    const problem = templateProblem(source);
    if (problem !== undefined) problems.push({ property, message: problem });
  }
  return problems;
}

const parsed = new Map<string, Template[]>();
const MAX_CACHED = 500;

function compile(source: string): Template[] {
  let templates = parsed.get(source);
  if (!templates) {
    templates = liquid.parse(source);
    if (parsed.size >= MAX_CACHED) parsed.delete(parsed.keys().next().value!);
    parsed.set(source, templates);
  }
  return templates;
}

export async function render(source: string, variables: Record<string, unknown>): Promise<string> {
  return String(await liquid.render(compile(source), variables));
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, name: string) => {
    if (name[0] === '#') {
      const code = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
}

/**
 * The text part of an HTML email: block ends become line breaks, links keep their address,
 * tags go and entities are decoded. Values were escaped into the HTML, so they come back as
 * the text that was submitted.
 */
export function htmlToText(html: string): string {
  return decodeEntities(
    html
      .replace(/<(script|style|head|title)\b[^>]*>[\s\S]*?<\/\1\s*>/gi, '')
      .replace(/<!--[\s\S]*?-->/g, '')
      .replace(/\s*\n\s*/g, ' ')
      .replace(/<a\b[^>]*\bhref\s*=\s*["']([^"']*)["'][^>]*>([\s\S]*?)<\/a\s*>/gi, (_, href: string, label: string) =>
        label.replace(/<[^>]*>/g, '').trim() === href || href.startsWith('#') ? label : `${label} (${href})`,
      )
      .replace(/<br\s*\/?>/gi, '\n')
      .replace(/<\/th\s*>/gi, ': ')
      .replace(/<\/td\s*>/gi, ' ')
      .replace(/<li\b[^>]*>/gi, '- ')
      .replace(/<\/(p|div|h[1-6]|tr|li|ul|ol|table|blockquote|pre|section|header|footer)\s*>/gi, '\n')
      .replace(/<(p|div|h[1-6]|table|ul|ol|blockquote|pre|hr)\b[^>]*>/gi, '\n')
      .replace(/<[^>]*>/g, ''),
  )
    .split('\n')
    .map((line) => line.replace(/[ \t]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
