import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dialectName, startTestApp } from './support/helpers.js';

describe(`remote address behind a proxy (${dialectName})`, () => {
  for (const [trust, expected] of [
    [undefined, '127.0.0.1'],
    ['true', '203.0.113.9'],
    ['1', '203.0.113.9'],
    ['127.0.0.1', '203.0.113.9'],
    ['10.0.0.0/8', '127.0.0.1'],
  ] as const) {
    it(`TRUST_PROXY=${trust ?? '(unset)'} records ${expected}`, async () => {
      const app = await startTestApp(trust === undefined ? {} : { TRUST_PROXY: trust });
      try {
        const a = await app.account();
        const form = (await a.post('/forms', { name: 'Proxy', fields: [{ type: 'text', label: 'Q' }] })).body;
        const res = await a.post(
          `/forms/${form.id}/submissions`,
          { fields: [{ id: form.fields[0].id, value: 'x' }] },
          { headers: { 'x-forwarded-for': '203.0.113.9' } },
        );
        assert.equal(res.status, 200);
        assert.equal(res.body.remoteAddr, expected);
      } finally {
        await app.close();
      }
    });
  }
});
