import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { lazyChildLogger } from '../../src/http/logging.js';

function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: pino({ level }, stream) as unknown as FastifyBaseLogger };
}

describe('lazy request loggers', () => {
  it('write what the level lets through, with the bindings, and nothing else', async () => {
    const { lines, logger } = capture('warn');
    const log = lazyChildLogger(logger, { requestId: 'r-1' }, {});
    log.info('not written');
    log.debug('not written');
    log.warn({ extra: 1 }, 'written');
    log.error('also written');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      lines.map((l) => [l.msg, l.requestId, l.extra]),
      [
        ['written', 'r-1', 1],
        ['also written', 'r-1', undefined],
      ],
    );
    assert.equal(log.level, 'warn');
  });

  it('honour a level of their own (a route logLevel) below the parent level', async () => {
    const { lines, logger } = capture('warn');
    const log = lazyChildLogger(logger, { requestId: 'r-2' }, { level: 'debug' });
    log.debug('route debug line');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      lines.map((l) => [l.msg, l.requestId]),
      [['route debug line', 'r-2']],
    );
  });
});
