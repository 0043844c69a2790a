import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describe, it } from 'node:test';
import {
  newFormKeys,
  open,
  openStream,
  seal,
  SEAL_OVERHEAD,
  sealStream,
  SealError,
  unwrapFormKey,
  wrapFormKey,
  WrongPasswordError,
} from '../src/crypto/envelope.js';
import { Hasher } from '../src/crypto/hasher.js';

const kdf = new Hasher({ concurrency: 2, queueLimit: 100 }).kdf();
/**
 * For what does not depend on the cost: a derivation at the service's N=2^17 takes most of a
 * second of CPU, and every leg of CI runs this file.
 */
const cheap = new Hasher({ concurrency: 2, queueLimit: 100, params: { N: 2 ** 10, r: 8, p: 1 } }).kdf();

function chunks(data: Buffer, size: number): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < data.length; i += size) parts.push(data.subarray(i, i + size));
  return Readable.from(parts);
}

describe('encryption envelope', () => {
  it('seals to a form and opens only with its keys and the same binding', () => {
    const keys = newFormKeys();
    const other = newFormKeys();
    const text = Buffer.from('{"1":"hello"}');
    const a = seal(text, keys.publicKey, 'form A');
    const b = seal(text, keys.publicKey, 'form A');
    assert.equal(a.length, text.length + SEAL_OVERHEAD);
    assert.notDeepEqual(a, b, 'every value has its own nonce');
    assert.deepEqual(open(a, keys, 'form A'), text);
    assert.throws(() => open(a, keys, 'form B'), SealError);
    assert.throws(() => open(a, other, 'form A'), SealError);
    const tampered = Buffer.from(a);
    tampered[tampered.length - 20]! ^= 1;
    assert.throws(() => open(tampered, keys, 'form A'), SealError);
  });

  it("wraps with the hasher's parameters and unwraps with the record's, whatever the unwrapping hasher makes", async () => {
    const keys = newFormKeys();
    const light = await wrapFormKey(keys, 'a long password', 'form key X', cheap);
    assert.deepEqual([light.N, light.r, light.p], [2 ** 10, 8, 1]);
    const full = await wrapFormKey(keys, 'a long password', 'form key X', kdf);
    for (const [record, by] of [
      [light, kdf],
      [full, cheap],
    ] as const) {
      const back = await unwrapFormKey(record, 'a long password', 'form key X', by);
      assert.deepEqual(open(seal(Buffer.from('y'), keys.publicKey, 'v'), back, 'v'), Buffer.from('y'));
    }
    await assert.rejects(unwrapFormKey(light, 'another password', 'form key X', kdf), WrongPasswordError);
  });

  it('wraps the private key with the password and refuses another password or form', async () => {
    const keys = newFormKeys();
    // The service's cost (unwrapped at it in the test above); the refusals below at a cheap one.
    const costly = await wrapFormKey(keys, 'a long password', 'form key X', kdf);
    assert.equal(costly.N, 2 ** 17);
    const wrapped = await wrapFormKey(keys, 'a long password', 'form key X', cheap);
    for (const record of [costly, wrapped]) assert.ok(!JSON.stringify(record).includes('a long password'));
    const back = await unwrapFormKey(wrapped, 'a long password', 'form key X', cheap);
    assert.deepEqual(open(seal(Buffer.from('x'), keys.publicKey, 'v'), back, 'v'), Buffer.from('x'));
    await assert.rejects(unwrapFormKey(wrapped, 'another password', 'form key X', cheap), WrongPasswordError);
    await assert.rejects(unwrapFormKey(wrapped, 'a long password', 'form key Y', cheap), WrongPasswordError);
    // A public key swapped in the stored record (to have new data sealed to another key) is caught on unwrap.
    const swapped = {
      ...wrapped,
      publicKey: (await wrapFormKey(newFormKeys(), 'x'.repeat(8), 'other', cheap)).publicKey,
    };
    await assert.rejects(unwrapFormKey(swapped, 'a long password', 'form key X', cheap), SealError);
  });

  it('seals and opens streams in any chunking, and fails an altered stream', async () => {
    const keys = newFormKeys();
    const data = randomBytes(300_001);
    const sealed = await buffer(chunks(data, 65_536).pipe(sealStream(keys.publicKey, 'file 1')));
    assert.equal(sealed.length, data.length + SEAL_OVERHEAD);
    assert.deepEqual(open(sealed, keys, 'file 1'), data, 'a sealed stream opens as a whole value');
    for (const size of [1, 7, 16, 4096, 1_000_000]) {
      const out = await buffer(chunks(sealed, size).pipe(openStream(keys, 'file 1')));
      assert.deepEqual(out, data, `chunks of ${size}`);
    }
    const empty = await buffer(Readable.from([]).pipe(sealStream(keys.publicKey, 'empty')));
    assert.equal((await buffer(Readable.from([empty]).pipe(openStream(keys, 'empty')))).length, 0);

    const altered = Buffer.from(sealed);
    altered[1000]! ^= 1;
    await assert.rejects(buffer(chunks(altered, 4096).pipe(openStream(keys, 'file 1'))), SealError);
    await assert.rejects(buffer(chunks(sealed, 4096).pipe(openStream(keys, 'file 2'))), SealError);
  });
});
