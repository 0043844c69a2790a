/**
 * The request id's async context: held by the work that may enqueue jobs, disabled when none
 * is under way (so that reads do not pay Node 20's promise hook), and right for each holder
 * while several overlap.
 */
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { currentRequestId, holdRequestId, requestIdHolders, withRequestId } from '../../src/request-context.js';

describe('request context', () => {
  it('keeps each holder its own id across awaits while others start and end', async () => {
    const releaseA = holdRequestId();
    const releaseB = holdRequestId();
    const seen: string[] = [];
    let endA!: () => void;
    const aDone = new Promise<void>((resolve) => (endA = resolve));
    const a = withRequestId('a', async () => {
      await tick();
      seen.push(`a:${currentRequestId()}`);
      await aDone;
    });
    const b = withRequestId('b', async () => {
      await tick();
      endA();
      await a;
      releaseA();
      await tick();
      // A let go and ended; B still holds, so its id is still there.
      seen.push(`b:${currentRequestId()}`);
    });
    await b;
    assert.equal(requestIdHolders(), 1);
    releaseB();
    releaseB(); // a second call changes nothing
    assert.equal(requestIdHolders(), 0);
    assert.deepEqual(seen, ['a:a', 'b:b']);
  });

  it('has no id once nothing holds it, and gives one again to the next holder', async () => {
    const release = holdRequestId();
    await withRequestId('first', async () => {
      await tick();
      assert.equal(currentRequestId(), 'first');
    });
    release();
    assert.equal(requestIdHolders(), 0);
    await (async () => {
      await tick();
      assert.equal(currentRequestId(), undefined);
    })();
    const again = holdRequestId();
    await withRequestId('second', async () => {
      await tick();
      assert.equal(currentRequestId(), 'second');
      await withRequestId(undefined, async () => {
        await tick();
        assert.equal(currentRequestId(), undefined);
      });
    });
    again();
    assert.equal(requestIdHolders(), 0);
  });
});
