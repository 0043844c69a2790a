import { TaskThread, threadModule, type ThreadKind } from '../../threads/task-thread.js';
import type { RenderAnswer } from './render-thread.js';
import { LIQUID_PART, renderEmail, TemplateLimitError, type EmailTemplates, type RenderedEmail } from './template.js';

/**
 * Rendering off the event loop. An email's templates are the form editor's, and LiquidJS runs
 * them on the loop that renders them: a loop written to run long (nested ranges) held it for
 * its whole renderLimit, 2 s then, and serve's loop is the API's too, so no request of any
 * account was answered meanwhile, on each of the job's attempts. renderLimit cannot bound that
 * by itself: it is checked between the parts of a template, not inside one filter, and
 * `(1..5000000) | uniq` or a sort of as long a range ran 2 to 3 s within a 100 ms renderLimit
 * and the memoryLimit. So the templates render in one worker thread per process
 * (render-thread.ts), started with the first email and sent one email at a time, in turn, with
 * a time limit that stops the thread itself and a heap of its own. One thread, not a pool:
 * emails are background jobs, and a render takes well under a millisecond (an HTML email with
 * the all_fields of 100 fields: 0.57 ms from send to answer, 0.15 ms of it on the loop for the
 * copies, where rendering on the loop took 0.24 ms; about 2,000 a second when many wait).
 */

/**
 * How long the thread may take over one email, its subject and message together and the text
 * part made of the HTML, before it is stopped and the email fails for good: what renderLimit
 * (RENDER_LIMIT_MS, a quarter of a second for each template) does not catch, a single filter
 * working through a huge range. An HTML message near MAX_RENDERED_CHARS took 1.5 s here, its
 * text part most of it: on a slower machine such a message (no one's email) is stopped too.
 */
export const RENDER_TIME_LIMIT_MS = 2_000;

/**
 * The thread's heap (V8's old generation). An ordinary render needs a few MB, and the largest
 * message the limits let through (19.7 million characters of HTML and its 12.7 million of text,
 * 1.5 s here) fits; past this V8 stops the thread, not the process, and the email fails for good.
 */
export const RENDER_HEAP_LIMIT_MB = 256;

const RENDER: ThreadKind<EmailTemplates, RenderAnswer, RenderedEmail> = {
  name: 'render',
  module: threadModule(import.meta.url, 'render-thread'),
  result(answer) {
    if ('error' in answer)
      throw answer.limit ? new TemplateLimitError(answer.error, answer.part) : new Error(answer.error);
    return { subject: answer.subject, text: answer.text, html: answer.html };
  },
  timedOut: (_templates, limitMs) =>
    new TemplateLimitError(`the templates took more than ${limitMs / 1000} s to render and were stopped`, undefined),
  outOfMemory: (_templates, heapLimitMb) =>
    new TemplateLimitError(
      `the templates needed more than the ${heapLimitMb} MB of memory a render may use, and were stopped`,
      undefined,
    ),
};

export class RenderThread extends TaskThread<EmailTemplates, RenderAnswer, RenderedEmail> {
  constructor(timeLimitMs = RENDER_TIME_LIMIT_MS, heapLimitMb = RENDER_HEAP_LIMIT_MB) {
    super(RENDER, timeLimitMs, heapLimitMb);
  }

  /**
   * The email's subject and message rendered (either left out is undefined). Throws
   * TemplateLimitError when a limit stopped the render (LiquidJS's, the length, the thread's
   * time or heap), and a plain Error for the other failures of a template or of the thread.
   */
  render(templates: EmailTemplates): Promise<RenderedEmail> {
    return this.run(templates);
  }
}

/** The process's render thread. */
export const renderThread = new RenderThread();

/** What can make a template's work grow past its own length: a loop (for, tablerow, or a liquid tag, which can hold one) or a range. */
const ITERATES = /\b(?:for|tablerow|liquid)\b|\.\./;
/** More outputs and tags than an email has: past this a template goes to the thread whatever it holds. */
const MAX_PARTS_ON_LOOP = 100;

/**
 * Whether a template may take long to render: only one that iterates can, since without a loop
 * or a range each of its at most MAX_PARTS_ON_LOOP parts does one filter chain over one
 * submission's values. Conservative (a "for" in a string counts too).
 */
export function mayRunLong(source: string | undefined): boolean {
  if (source === undefined) return false;
  const parts = source.match(LIQUID_PART) ?? [];
  return parts.length > MAX_PARTS_ON_LOOP || parts.some((p) => ITERATES.test(p));
}

/**
 * An email's templates rendered where it is safe and cheapest: on the loop when neither may run
 * long (most emails: the thread's copies both ways cost more than the render, measured on the
 * PostgreSQL POST with a webhook and an email, docs/performance.md "Forty-eighth pass"), in the
 * thread otherwise. Throws as RenderThread.render does.
 */
export function renderTemplates(templates: EmailTemplates): Promise<RenderedEmail> {
  return mayRunLong(templates.subject) || mayRunLong(templates.message)
    ? renderThread.render(templates)
    : renderEmail(templates);
}
