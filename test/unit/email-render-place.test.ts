/**
 * Where an email's templates render (src/modules/emails/threaded-render.ts): on the event loop
 * when none can iterate, in the render thread when one can (a loop or a range may run long
 * inside LiquidJS's limits), so that a form editor's template never holds the API's loop.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { mayRunLong, renderTemplates, renderThread } from '../../src/modules/emails/threaded-render.js';

const templates = (message: string) => ({
  format: 'text' as const,
  subject: 'Hello {{ name }}',
  message,
  textVariables: { name: 'Ann', items: ['a', 'b'] },
  htmlVariables: { name: 'Ann', items: ['a', 'b'] },
});

describe('where email templates render', () => {
  after(() => renderThread.close());

  it('says which templates may run long: loops, ranges, liquid tags, or more parts than an email has', () => {
    for (const source of [
      '{% for i in items %}{{ i }}{% endfor %}',
      '{%- tablerow i in items -%}{{ i }}{%- endtablerow -%}',
      '{{ (1..5000000) | uniq | size }}',
      '{% liquid\n assign n = 3\n %}',
      '{{ x }}'.repeat(101),
    ])
      assert.equal(mayRunLong(source), true, source);
    for (const source of [
      undefined,
      'Plain text, with a for in it and an ellipsis...',
      'Hi {{ name | upcase }}, {% if name %}yes{% else %}no{% endif %}',
      '{{ x }}'.repeat(100),
    ])
      assert.equal(mayRunLong(source), false, String(source));
  });

  it('renders what cannot run long on the loop, starting no thread, and the rest in the thread', async () => {
    const onLoop = await renderTemplates(templates('Thanks, {{ name }}.'));
    assert.deepEqual(onLoop, { subject: 'Hello Ann', text: 'Thanks, Ann.', html: undefined });
    assert.equal(renderThread.threadId, undefined, 'no thread was started');
    const inThread = await renderTemplates(templates('{% for i in items %}[{{ i }}]{% endfor %}'));
    assert.equal(inThread.text, '[a][b]');
    assert.notEqual(renderThread.threadId, undefined, 'the thread rendered it');
  });
});
