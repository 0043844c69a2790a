// Scratch (not committed): CPU per POST with and without events, worker off.
import { it } from 'node:test';
import { startTestApp } from '../test/support/helpers.js';

it('cost', async () => {
  const app = await startTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true' });
  const a = await app.account('A');
  const mk = async (name: string) => {
    const f = (await a.post('/forms', { name, fields: Array.from({ length: 10 }, (_, i) => ({ type: 'text', label: `Field label ${i}` })) })).body as any;
    return { id: f.id as number, ids: (f.fields as any[]).map((x) => x.id as number) };
  };
  const plain = await mk('plain');
  const ev = await mk('ev');
  await a.post(`/form/${ev.id}/webhook`, { url: 'http://127.0.0.1:9/hook' });
  const r = await a.post(`/forms/${ev.id}/notifications`, { recipients: ['t@example.com'], subject: 'New {{ form_name }}', message: '<p>{{ submission_id }}</p>{{ all_fields }}' });
  if (r.status !== 201) throw new Error(r.text);
  let n = 0;
  const block = async (f: { id: number; ids: number[] }) => {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const N = 1500;
    let next = 0;
    await Promise.all(Array.from({ length: 25 }, async () => {
      while (next < N) {
        next++;
        const res = await a.post(`/forms/${f.id}/submissions`, { fields: f.ids.map((id, i) => ({ id, value: `some value text ${i} ${n++}` })) });
        if (res.status !== 200) throw new Error(res.text);
      }
    }));
    const c = process.cpuUsage(c0);
    return { us: (c.user + c.system) / N, rps: N / ((performance.now() - t0) / 1000) };
  };
  await block(plain); await block(ev);
  for (let round = 0; round < 3; round++) {
    const p = await block(plain);
    const e = await block(ev);
    console.log(`plain ${p.us.toFixed(0)} us/req ${p.rps.toFixed(0)}/s   events ${e.us.toFixed(0)} us/req ${e.rps.toFixed(0)}/s   extra ${(e.us - p.us).toFixed(0)} us`);
  }
  await app.close();
});
