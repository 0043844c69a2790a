/**
 * The text part of an HTML email (htmlToText, src/modules/emails/template.ts), without a
 * server: what it makes of ordinary markup, and that it gets through markup left open in
 * time linear in its length.
 *
 * The second half converts inputs that the earlier regular expressions took quadratic (or,
 * for `href="` never closed, cubic) time on: each is large enough that the old function would
 * have run for more than a minute on it (measured on smaller ones and extrapolated, beside
 * each), where the linear one takes well under a second. The conversion runs in a worker
 * thread, since a test's timeout cannot interrupt synchronous work on its own thread: the
 * test's 30 s timeout fails it, and the worker is stopped, rather than the run waiting. No
 * test measures time itself.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { htmlToText, MAX_RENDERED_CHARS, render } from '../src/modules/emails/template.js';

/** Markup left open, by name: the input, and the text it must give. */
const OPEN_MARKUP: Record<string, () => { html: string; text: string }> = {
  // 16,000 took 420 ms.
  '200,000 <a href> never closed': () => ({ html: '<a href="x">'.repeat(200_000), text: '' }),
  // 16,000 took 404 ms.
  '200,000 <script> never closed': () => ({ html: '<script>'.repeat(200_000), text: '' }),
  // 16,000 took 2.8 s.
  '100,000 <script without a >': () => ({ html: 'a<script'.repeat(100_000), text: 'a<script'.repeat(100_000) }),
  // 32,000 took 0.8 s.
  '1,000,000 < without a >': () => ({ html: `a ${'<'.repeat(1_000_000)}`, text: `a ${'<'.repeat(1_000_000)}` }),
  // 32,000 took 5.9 s.
  '200,000 <!-- never closed': () => ({ html: '<!--'.repeat(200_000), text: '<!--'.repeat(200_000) }),
  // 32,000 took 1.3 s.
  '500,000 spaces without a line break': () => ({ html: `a${' '.repeat(500_000)}b`, text: 'a b' }),
  // 16,000 took 1.9 s.
  '200,000 <li without a >': () => ({ html: '<li'.repeat(200_000), text: '<li'.repeat(200_000) }),
  // 16,000 took 0.75 s.
  '200,000 <p without a >': () => ({ html: '<p'.repeat(200_000), text: '<p'.repeat(200_000) }),
  // 1,000 took 2.5 s, and twice as many eight times as long.
  '20,000 <a href=" never closed': () => ({ html: '<a href="'.repeat(20_000), text: '<a href="'.repeat(20_000) }),
  // 2,000 took 34 ms.
  '200,000 hrefs in one <a without a >': () => ({
    html: `<a${' href="x"'.repeat(200_000)}`,
    text: `<a${' href="x"'.repeat(200_000)}`,
  }),
  // 32,000 took 1.4 s.
  'a link whose label holds 1,000,000 < without a >': () => ({
    html: `<a href="x">${'<'.repeat(1_000_000)}</a>`,
    text: `${'<'.repeat(1_000_000)} (x)`,
  }),
};

if (!isMainThread) {
  const { html } = OPEN_MARKUP[workerData as string]!();
  parentPort!.postMessage(htmlToText(html));
} else {
  /** htmlToText of a named input, in a worker that the end of the test stops. */
  function convertApart(t: TestContext, name: string): Promise<string> {
    // Run straight from the TypeScript (node --import tsx --test), the worker registers tsx first.
    const load = import.meta.url.endsWith('.ts')
      ? `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(import.meta.url)}); })`
      : `import(${JSON.stringify(import.meta.url)})`;
    const worker = new Worker(load, { eval: true, workerData: name });
    const stop = () => void worker.terminate();
    t.signal.addEventListener('abort', stop);
    return new Promise<string>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the worker ended (${code}) without an answer`)));
    }).finally(stop);
  }

  describe('the text part of an HTML email', () => {
    it('keeps the text, breaks lines at blocks and keeps the addresses of links', () => {
      const html =
        '<h1>Contact &lt;us&gt;</h1><p>You wrote: &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; ' +
        '&lt;b&gt;bold&lt;/b&gt;</p><table cellpadding="4" cellspacing="0"><tr><th align="left" valign="top">' +
        'Name</th><td>Ann O&quot;Neil</td></tr><tr><th align="left" valign="top">Note</th><td>one<br>two</td>' +
        '</tr></table><p>At 2026</p>';
      assert.equal(
        htmlToText(html),
        'Contact <us>\n\nYou wrote: <script>alert("x")</script> & <b>bold</b>\n\nName: Ann O"Neil\nNote: one\ntwo\n\nAt 2026',
      );
      assert.equal(
        htmlToText(
          '<html><head><title>T</title><style>p{}</style></head><body><!-- note --><ul><li>One</li>' +
            '<li class="x">Two <a href="https://e.com">link</a></li></ul><a href="#top">top</a> ' +
            '<A HREF=\'https://e.com\'>https://e.com</A ><script type="x">bad()</SCRIPT></body></html>',
        ),
        '- One\n- Two link (https://e.com)\n\ntop https://e.com',
      );
    });

    it('leaves what is never closed as the earlier expressions did', () => {
      // A link runs to the first </a> after it, over any <a> between; one without is no link.
      assert.equal(htmlToText('<a href="u">a <a href="v">b</a>'), 'a b (u)');
      assert.equal(htmlToText('<a href="u">a'), 'a');
      // An unclosed <script> loses its tag only; a comment never closed stays.
      assert.equal(htmlToText('<script>x<p>y'), 'x\ny');
      assert.equal(htmlToText('a <!-- b'), 'a <!-- b');
      // A < is a tag up to the first > after it, and text when there is none.
      assert.equal(htmlToText('1 < 2 <b>and</b> 3'), '1 and 3');
      assert.equal(htmlToText('1 < 2 and 3'), '1 < 2 and 3');
      // A line break in a run of white space makes the run one space; other runs stay.
      assert.equal(htmlToText('a \n\t b\u00a0\u00a0c'), 'a b\u00a0\u00a0c');
      // The last href of a tag wins, and may hold a >.
      assert.equal(htmlToText('<a href="u" href="v>w">x</a>'), 'x (v>w)');
    });

    for (const name of Object.keys(OPEN_MARKUP)) {
      it(`gets through ${name}`, { timeout: 30_000 }, async (t) => {
        const { text } = OPEN_MARKUP[name]!();
        assert.equal(await convertApart(t, name), text);
      });
    }
  });

  describe('the length of a rendered template', () => {
    it(`is at most ${MAX_RENDERED_CHARS} characters, and a render past it fails`, async () => {
      const block = 'x'.repeat(10_000);
      const times = MAX_RENDERED_CHARS / block.length;
      assert.equal((await render(`{% for i in (1..${times}) %}${block}{% endfor %}`, {})).length, MAX_RENDERED_CHARS);
      await assert.rejects(
        render(`{% for i in (1..${times}) %}${block}{% endfor %}!`, {}),
        /the rendered template is longer than 20000000 characters/,
      );
    });
  });
}
