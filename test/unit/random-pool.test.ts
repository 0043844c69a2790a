import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomBase64url } from '../../src/crypto/random-pool.js';

describe('pooled random ids', () => {
  it('hands out each block byte once: ids are distinct across many blocks, and of the asked size', () => {
    const seen = new Set<string>();
    // 16 bytes each: 256 per 4 KiB block, so this crosses about 20 blocks and their edges.
    for (let i = 0; i < 5000; i++) {
      const id = randomBase64url(16);
      assert.equal(Buffer.from(id, 'base64url').length, 16);
      seen.add(id);
    }
    assert.equal(seen.size, 5000);
    // Sizes that do not divide the block, and one larger than the pool serves.
    for (const size of [12, 7, 255, 300]) assert.equal(Buffer.from(randomBase64url(size), 'base64url').length, size);
  });
});
