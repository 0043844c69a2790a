import {
  AssertionError,
  CaptureTag,
  filters,
  Liquid,
  Tag,
  type Context,
  type Template,
  type TagToken,
  type TopLevelToken,
} from 'liquidjs';
import type { ErrorDetail } from '../../errors.js';

/**
 * How long one render of a subject or a message may run, in the render thread
 * (threaded-render.ts), before LiquidJS stops it. An email's templates render in well under a
 * millisecond (a subject and an HTML message with all_fields of a 100-field submission, 0.24 ms
 * on a 2-core machine): a quarter of a second fails only a template made to loop, and keeps one
 * from holding the thread, which renders every email of the process in turn, for long.
 */
export const RENDER_LIMIT_MS = 250;

/**
 * Emails' subjects and messages are Liquid templates (LiquidJS: no code runs, only its own
 * tags and filters). Templates come from form editors and values from anyone who submits, so:
 * includes and layouts are refused (they would read files), unknown filters are refused when
 * the template is saved, and a render has limits of time and memory (and runs in a thread of
 * its own, with a harder limit of time and a heap of its own: threaded-render.ts).
 */
const liquid = new Liquid({
  strictFilters: true,
  ownPropertyOnly: true,
  templates: {},
  parseLimit: 200_000,
  renderLimit: RENDER_LIMIT_MS,
  memoryLimit: 20_000_000,
});

/**
 * A render stopped by one of its limits (time, memory, length, the thread's own): the same
 * template and values would be stopped again, so its email fails for good rather than being
 * retried (send.ts). `part` is the template that was being rendered.
 */
export class TemplateLimitError extends Error {
  constructor(
    message: string,
    readonly part: TemplatePart | undefined,
  ) {
    super(message);
    this.name = 'TemplateLimitError';
  }
}

export type TemplatePart = 'subject' | 'message';

/** Whether LiquidJS stopped a render at one of its limits (its Limiter's assertion, however wrapped). */
function isLiquidLimit(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = (e as { originalError?: unknown }).originalError)
    if (e instanceof AssertionError && / limit exceeded$/.test(e.message)) return true;
  return false;
}

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

/**
 * A capture keeps what it renders in a variable, and LiquidJS charges that to no limit: a
 * capture doubled a dozen times (`{% capture a %}{{a}}{{a}}{% endcapture %}`, four parts each)
 * held 368 million characters at no cost of time (V8 joins strings without copying them), and a
 * `replace` of it then asked V8 for an array it cannot make, which aborts the whole process (the
 * render thread's as well as the API's): on saving the template, which renders it once on the
 * event loop, or on sending it when the doubled text is a submitted value. What a capture holds
 * is charged to memoryLimit here, as the output of a filter is, so no variable outgrows it.
 */
class BoundedCapture extends CaptureTag {
  override *render(ctx: Context): Generator<unknown, void, string> {
    yield* super.render(ctx);
    ctx.memoryLimit.use(String((ctx.bottom() as Record<string, unknown>)[this.variable] ?? '').length);
  }
}
liquid.registerTag('capture', BoundedCapture);

// LiquidJS's replace splits its input before it charges the result to memoryLimit, so a long
// input split on one character is allocated in full before any limit is checked: charged first.
const builtinReplace = filters.replace as (this: unknown, ...args: unknown[]) => unknown;
liquid.registerFilter('replace', function (this: { context: Context }, input: unknown, ...args: unknown[]) {
  this.context.memoryLimit.use(typeof input === 'string' ? input.length : String(input ?? '').length);
  return builtinReplace.apply(this, [input, ...args]);
});

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

/** A Liquid output or tag of a template's source: where merge tags and loops can be. */
export const LIQUID_PART = /\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\}/g;

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

/**
 * The longest a rendered subject or message may be, in characters: the figure of
 * memoryLimit, since LiquidJS charges that limit for ranges and filters but not for what a
 * template writes out, so a loop over a large block of markup stays within it and within
 * renderLimit (450 million characters came out of a 100,000-character template in 90 ms).
 * No one sends an email that size, and the text part, the mail log and the SMTP message would
 * each work through all of it; past this the render fails as it does past its other limits.
 */
export const MAX_RENDERED_CHARS = 20_000_000;

/** One template rendered within the limits; a limit that stops it is a TemplateLimitError naming `part`. */
export async function render(
  source: string,
  variables: Record<string, unknown>,
  part: TemplatePart = 'message',
): Promise<string> {
  let out: string;
  try {
    // Synchronously: renderLimit is a deadline on the wall clock, and an asynchronous render
    // steps through microtasks, between which the other continuations on the same loop run (the
    // worker's other jobs, in serve the API's requests). A plain template caught behind 250 ms of
    // someone else's work was stopped at its limit, and its email failed for good. Nothing in an
    // email's templates waits (no include, no file system), so the render gives nothing up.
    out = String(liquid.renderSync(compile(source), variables));
  } catch (error) {
    if (isLiquidLimit(error)) throw new TemplateLimitError((error as Error).message, part);
    throw error;
  }
  if (out.length > MAX_RENDERED_CHARS)
    throw new TemplateLimitError(`the rendered template is longer than ${MAX_RENDERED_CHARS} characters`, part);
  return out;
}

/** What an email's rendering takes: its templates (either may be left out) and the merge tags' values. */
export interface EmailTemplates {
  format: 'html' | 'text';
  subject: string | undefined;
  message: string | undefined;
  /** The merge tags with values as they are (the subject, and text messages). */
  textVariables: Record<string, unknown>;
  /** The merge tags with values HTML-escaped (HTML messages). */
  htmlVariables: Record<string, unknown>;
}

export interface RenderedEmail {
  subject: string | undefined;
  text: string | undefined;
  html: string | undefined;
}

/**
 * The subject (as text, on one line, within SMTP's 998 characters) and the message (for an
 * HTML message, its text part too), from their templates: what the render thread does for
 * each email (render-thread.ts).
 */
export async function renderEmail(t: EmailTemplates): Promise<RenderedEmail> {
  const subject =
    t.subject === undefined
      ? undefined
      : (await render(t.subject, t.textVariables, 'subject')).replace(/\s+/g, ' ').trim().slice(0, 998);
  if (t.message === undefined) return { subject, text: undefined, html: undefined };
  if (t.format === 'text')
    return { subject, text: await render(t.message, t.textVariables, 'message'), html: undefined };
  const html = await render(t.message, t.htmlVariables, 'message');
  return { subject, text: htmlToText(html), html };
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
 * The first `>` at or after a position, for searches that mostly move forward: a search from
 * before the last answer gets it again without looking, so that many tags opened in one
 * stretch without a `>` (or with none at all) do not each read the stretch to its end.
 */
function gtFinder(text: string): (from: number) => number {
  let searched = Infinity;
  let found = -1;
  return (from) => {
    if (from < searched || (found !== -1 && from > found)) {
      searched = from;
      found = text.indexOf('>', from);
    }
    return found;
  };
}

/** Where a global pattern matches, found in one pass, for finding the first from a position. */
class Matches {
  readonly starts: number[] = [];
  readonly ends: number[] = [];

  constructor(text: string, pattern: RegExp) {
    for (const m of text.matchAll(pattern)) {
      this.starts.push(m.index);
      this.ends.push(m.index + m[0].length);
    }
  }

  /** The index of the first match that starts at or after `from`, or -1. */
  firstFrom(from: number): number {
    let low = 0;
    let high = this.starts.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.starts[mid]! < from) low = mid + 1;
      else high = mid;
    }
    return low < this.starts.length ? low : -1;
  }
}

/**
 * Each tag that `opening` finds (its start, `<name`) through the first `>` after it, replaced
 * by `by`: what `/<name\b[^>]*>/gi` replaces. A start with no `>` after it ends the work,
 * since no later one has any either.
 */
function replaceTags(html: string, opening: RegExp, by: string): string {
  const nextGt = gtFinder(html);
  let out = '';
  let copied = 0;
  for (let m = opening.exec(html); m !== null; m = opening.exec(html)) {
    const gt = nextGt(m.index + m[0].length);
    if (gt === -1) break;
    out += html.slice(copied, m.index) + by;
    copied = opening.lastIndex = gt + 1;
  }
  return out + html.slice(copied);
}

const stripTags = (html: string) => replaceTags(html, /</g, '');

/**
 * What `/<(script|style|head|title)\b[^>]*>[\s\S]*?<\/\1\s*>/gi` removes: each such element
 * through its first closing tag. One never closed is left (its tags go later, its text stays).
 */
function removeRawText(html: string): string {
  const opening = /<(script|style|head|title)\b/gi;
  const nextGt = gtFinder(html);
  const closings = new Map<string, Matches>();
  let out = '';
  let copied = 0;
  for (let m = opening.exec(html); m !== null; m = opening.exec(html)) {
    const gt = nextGt(m.index + m[0].length);
    if (gt === -1) break;
    const name = m[1]!.toLowerCase();
    let closing = closings.get(name);
    if (!closing) closings.set(name, (closing = new Matches(html, new RegExp(`</${name}\\s*>`, 'gi'))));
    const c = closing.firstFrom(gt + 1);
    if (c === -1) continue;
    out += html.slice(copied, m.index);
    copied = opening.lastIndex = closing.ends[c]!;
  }
  return out + html.slice(copied);
}

/** What `/<!--[\s\S]*?-->/g` removes. */
function removeComments(html: string): string {
  let out = '';
  let copied = 0;
  for (let at = html.indexOf('<!--'); at !== -1; at = html.indexOf('<!--', copied)) {
    const end = html.indexOf('-->', at + 4);
    if (end === -1) break;
    out += html.slice(copied, at);
    copied = end + 3;
  }
  return out + html.slice(copied);
}

interface Link {
  /** Where `href` starts. */
  at: number;
  href: string;
  label: string;
  /** Just past `</a>`. */
  end: number;
}

const HREF = /\bhref\s*=\s*["']/gi;
const QUOTE = /["']/g;

/**
 * The link an `<a` gets when `[^>]*` before its `href` can reach from `from` to `to` (the
 * first `>` after the `<a`): the last `href="…"` there whose tag ends and whose link is
 * closed, as the pattern's backtracking finds it. Every `<a` before the same `>` reaches the
 * same `href`s, so one look serves them all, and each `href` is looked at for one `>` only.
 */
function lastLink(html: string, from: number, to: number, closings: Matches): Link | undefined {
  const part = html.slice(from, to);
  const heads: number[] = [];
  HREF.lastIndex = 0;
  for (let m = HREF.exec(part); m !== null; m = HREF.exec(part)) heads.push(from + m.index, HREF.lastIndex + from);
  for (let i = heads.length - 2; i >= 0; i -= 2) {
    const at = heads[i]!;
    const value = heads[i + 1]!;
    QUOTE.lastIndex = value;
    const end = QUOTE.exec(html)?.index;
    if (end === undefined) continue;
    // A value holds no quote, so only the last one can run past `to`.
    const gt = end < to ? to : html.indexOf('>', end + 1);
    if (gt === -1) continue;
    const c = closings.firstFrom(gt + 1);
    if (c === -1) continue;
    return { at, href: html.slice(value, end), label: html.slice(gt + 1, closings.starts[c]), end: closings.ends[c]! };
  }
  return undefined;
}

/**
 * What `/<a\b[^>]*\bhref\s*=\s*["']([^"']*)["'][^>]*>([\s\S]*?)<\/a\s*>/gi` finds, each link
 * replaced by its label, then its address in brackets unless the label says it already or it
 * points within the message.
 */
function replaceLinks(html: string): string {
  const opening = /<a\b/gi;
  const nextGt = gtFinder(html);
  let closings: Matches | undefined;
  let lastTo = -1;
  let link: Link | undefined;
  let out = '';
  let copied = 0;
  for (let m = opening.exec(html); m !== null; m = opening.exec(html)) {
    const to = nextGt(m.index + 2);
    if (to === -1) break;
    closings ??= new Matches(html, /<\/a\s*>/gi);
    if (to !== lastTo) {
      lastTo = to;
      link = lastLink(html, m.index + 3, to, closings);
    }
    if (!link || link.at < m.index + 3) continue;
    const { href, label } = link;
    out +=
      html.slice(copied, m.index) +
      (stripTags(label).trim() === href || href.startsWith('#') ? label : `${label} (${href})`);
    copied = opening.lastIndex = link.end;
  }
  return out + html.slice(copied);
}

/**
 * The text part of an HTML email: block ends become line breaks, links keep their address,
 * tags go and entities are decoded. Values were escaped into the HTML, so they come back as
 * the text that was submitted.
 *
 * Each step does what the regular expression in its comment would, but in time linear in the
 * HTML: those patterns, run as such, read to the end of the text from each tag left open (an
 * `<a href>` without `</a>`, a `<script>` without `</script>`, a `<` or `<!--` never closed),
 * so a template that wrote a few hundred thousand of them held the process for minutes.
 */
export function htmlToText(html: string): string {
  const steps = [
    removeRawText,
    removeComments,
    // A run of white space with a line break in it becomes one space, as with /\s*\n\s*/g, but
    // tried only where the run starts, not again from each of its characters.
    (h: string) => h.replace(/(?<!\s)\s*\n\s*/g, ' '),
    replaceLinks,
    (h: string) =>
      h
        .replace(/<br\s*\/?>/gi, '\n')
        .replace(/<\/th\s*>/gi, ': ')
        .replace(/<\/td\s*>/gi, ' '),
    (h: string) => replaceTags(h, /<li\b/gi, '- '),
    (h: string) => h.replace(/<\/(p|div|h[1-6]|tr|li|ul|ol|table|blockquote|pre|section|header|footer)\s*>/gi, '\n'),
    (h: string) => replaceTags(h, /<(p|div|h[1-6]|table|ul|ol|blockquote|pre|hr)\b/gi, '\n'),
    stripTags,
  ];
  return decodeEntities(steps.reduce((h, step) => step(h), html))
    .split('\n')
    .map((line) => line.replace(/[ \t]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
