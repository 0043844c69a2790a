/**
 * Which addresses webhooks may reach when WEBHOOK_ALLOW_PRIVATE is off, the checked lookup
 * that http agents use, and the retry delays of a schedule: no server, no database.
 */
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { describe, it } from 'node:test';
import { scheduledDelay } from '../../src/jobs/retry.js';
import { addressProblem, checkedLookup, checkLiteralHost } from '../../src/modules/webhooks/address.js';
import { RETRY_SCHEDULE, retryAfterAt } from '../../src/modules/webhooks/delivery.js';
import { Clock } from '../../src/clock.js';

describe('webhook addresses', () => {
  it('lets through global unicast addresses only', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8'])
      assert.equal(addressProblem(address), undefined, address);
    const refused: [string, string][] = [
      ['127.0.0.1', 'loopback'],
      ['127.255.0.9', 'loopback'],
      ['::1', 'loopback'],
      ['10.0.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.1.1', 'private'],
      ['169.254.169.254', 'linkLocal'],
      ['fe80::1', 'linkLocal'],
      ['100.64.0.1', 'carrierGradeNat'],
      ['100.100.100.200', 'carrierGradeNat'],
      ['fd00:ec2::254', 'uniqueLocal'],
      ['224.0.0.251', 'multicast'],
      ['ff02::1', 'multicast'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['255.255.255.255', 'broadcast'],
      ['192.0.2.1', 'reserved'],
      ['198.18.0.1', 'reserved'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:10.0.0.1', 'private'],
      ['64:ff9b::7f00:1', 'rfc6052'],
      ['2002:7f00:1::', '6to4'],
      ['2001::1', 'teredo'],
    ];
    for (const [address, range] of refused) assert.equal(addressProblem(address), `a ${range} address`, address);
  });

  it('refuses an internal IP literal, which no lookup sees', () => {
    assert.throws(() => checkLiteralHost('127.0.0.1'), /refused to connect to 127\.0\.0\.1, a loopback address/);
    assert.throws(() => checkLiteralHost('[::1]'), /::1, a loopback address/);
    assert.doesNotThrow(() => checkLiteralHost('8.8.8.8'));
    assert.doesNotThrow(() => checkLiteralHost('localhost'), 'a name is judged by the lookup');
  });

  it('refuses a name that resolves to an internal address, at lookup', async () => {
    const result = await new Promise<{ error: Error | null; addresses?: unknown }>((resolve) =>
      checkedLookup('localhost', { all: true }, (error, addresses) => resolve({ error, addresses })),
    );
    assert.ok(result.error);
    assert.match(result.error.message, /refused to connect to localhost: it resolves to (127\.0\.0\.1|::1)/);
    const single = await new Promise<Error | null>((resolve) =>
      checkedLookup('localhost', {}, (error) => resolve(error)),
    );
    assert.match(String(single), /refused to connect to localhost/);
  });

  it('passes the addresses of a public name through, in either form the caller asks for', async () => {
    // An IP literal given to a lookup resolves to itself without DNS: a stand-in for a public name.
    const all = await new Promise<LookupAddress[]>((resolve, reject) =>
      checkedLookup('8.8.8.8', { all: true }, (error, addresses) =>
        error ? reject(error) : resolve(addresses as unknown as LookupAddress[]),
      ),
    );
    assert.deepEqual(all, [{ address: '8.8.8.8', family: 4 }]);
    const one = await new Promise<[string, number]>((resolve, reject) =>
      checkedLookup('8.8.8.8', {}, (error, address, family) =>
        error ? reject(error) : resolve([address as string, family as number]),
      ),
    );
    assert.deepEqual(one, ['8.8.8.8', 4]);
  });
});

describe('webhook retry times', () => {
  it('follows the schedule within its jitter, the last delay repeating', () => {
    const { delaysMs } = RETRY_SCHEDULE;
    assert.deepEqual(delaysMs, [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    for (let attempt = 1; attempt <= 9; attempt++) {
      const base: number = delaysMs[Math.min(attempt, delaysMs.length) - 1]!;
      assert.equal(scheduledDelay(attempt, RETRY_SCHEDULE, 0), Math.round(base * 0.9));
      assert.equal(scheduledDelay(attempt, RETRY_SCHEDULE, 0.5), base);
      assert.equal(scheduledDelay(attempt, RETRY_SCHEDULE, 1), Math.round(base * 1.1));
    }
  });

  it('reads Retry-After in seconds or as an HTTP date, never in the past and at most a day ahead', () => {
    // The reading is taken once and passed in, so that a stalled machine cannot move it between calls.
    const clock = new Clock();
    clock.advance(3_600_000);
    const now = clock.fromSystem(Date.UTC(2026, 10, 24, 12, 0, 0));
    const at = (value: string | undefined) => {
      const t = retryAfterAt(value, { clock }, now);
      return t === undefined ? undefined : t - now;
    };
    assert.equal(at('120'), 120_000);
    assert.equal(at(undefined), undefined);
    assert.equal(at('soon'), undefined);
    assert.equal(at('999999999'), 24 * 3_600_000);
    const inAnHour = new Date(clock.toSystem(now) + 3_600_000).toUTCString();
    assert.equal(at(inAnHour), 3_600_000);
    const past = new Date(clock.toSystem(now) - 3_600_000).toUTCString();
    assert.equal(at(past), 0);
  });
});
