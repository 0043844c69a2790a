import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { Hasher, HashingBusyError, SCRYPT_PARAMS } from '../src/crypto/hasher.js';
import { hashPassword, unmatchableHash, verifyPassword } from '../src/crypto/secrets.js';
import { TooManyRequestsError } from '../src/errors.js';
import { dialectName, startTestApp, type Reply } from './support/helpers.js';
import { toWindowStart } from './support/quota.js';
import { authorizeUrl, Browser, readForm, registerClient } from './support/oauth-flow.js';

const PASSWORD = 'correct horse battery staple';
const CHEAP = { N: 2 ** 10, r: 8, p: 1 };

function assertError(res: Reply, status: number, code: string, what: string): void {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text.slice(0, 300)}`);
  assert.equal(res.body.status, 'error', what);
  assert.equal(res.body.code, code, what);
}

describe('bounded password hasher', () => {
  it('runs at most `concurrency` hashes, queues `queueLimit`, and refuses the next at once', async () => {
    const hasher = new Hasher({ concurrency: 1, queueLimit: 1 });
    const calls = [0, 1, 2].map(() =>
      hasher.scrypt('password', randomBytes(16), 32, CHEAP).then(
        (key) => ({ key }),
        (error: unknown) => ({ error }),
      ),
    );
    const [first, second, third] = await Promise.all(calls);
    assert.ok('key' in first! && first.key.length === 32);
    assert.ok('key' in second! && second.key.length === 32);
    assert.ok('error' in third! && third.error instanceof HashingBusyError);
    assert.equal(third.error.statusCode, 503);
    assert.equal(third.error.code, 'hashing_busy');
    assert.ok(third.error.retryAfterSeconds! >= 1);
    assert.deepEqual(hasher.load, { running: 0, waiting: 0 }, 'every slot is given back');
  });

  it("makes new hashes with its parameters (the service's unless given) and checks a stored one with the stored one's", async () => {
    const service = new Hasher({ concurrency: 1, queueLimit: 1 }).kdf();
    const cheap = new Hasher({ concurrency: 1, queueLimit: 1, params: CHEAP }).kdf();
    assert.deepEqual(SCRYPT_PARAMS, { N: 2 ** 17, r: 8, p: 1 }, "OWASP's floor");
    assert.deepEqual(service.params, SCRYPT_PARAMS);
    const made = await hashPassword(PASSWORD, cheap);
    assert.match(made, /^scrypt\$1024\$8\$1\$/);
    assert.equal(await verifyPassword(PASSWORD, made, service), true);
    assert.equal(await verifyPassword('a wrong guess', made, service), false);
    const full = await hashPassword(PASSWORD, service);
    assert.match(full, /^scrypt\$131072\$8\$1\$/);
    assert.equal(await verifyPassword(PASSWORD, full, cheap), true);
    // An unknown email's stand-in costs what a new hash costs, and matches nothing.
    assert.match(unmatchableHash(service.params), /^scrypt\$131072\$8\$1\$/);
    assert.equal(await verifyPassword(PASSWORD, unmatchableHash(cheap.params), cheap), false);
  });

  it('counts the account before it queues, and a spent budget takes no slot', async () => {
    const charged: number[] = [];
    const hasher = new Hasher({
      concurrency: 1,
      queueLimit: 0,
      chargeAccount: async (account) => {
        charged.push(account);
        if (account === 2) throw new TooManyRequestsError('rate_limited', 60);
      },
    });
    await hasher.scrypt('password', randomBytes(16), 32, CHEAP, { account: 1 });
    await assert.rejects(hasher.scrypt('password', randomBytes(16), 32, CHEAP, { account: 2 }), TooManyRequestsError);
    // Sign-in and the command line name no account: nothing is charged.
    await hasher.scrypt('password', randomBytes(16), 32, CHEAP);
    assert.deepEqual(charged, [1, 2]);
    assert.deepEqual(hasher.load, { running: 0, waiting: 0 });
  });
});

describe(`password hashing limits (${dialectName})`, () => {
  it('answers 503 hashing_busy with Retry-After beyond the queue, while other requests answer', async () => {
    // The service's own scrypt cost: the hashes must take long enough for the queue to fill.
    const app = await startTestApp({ HASH_CONCURRENCY: '1', HASH_QUEUE_LIMIT: '2' }, undefined, {
      productionHashes: true,
    });
    try {
      const [a, b] = [await app.account('A'), await app.account('B')];
      // Eight hashes at once from two accounts (forms and a user), one slot and two places in the queue.
      const hashing = [
        ...Array.from({ length: 6 }, (_, i) =>
          (i % 2 ? a : b).post('/forms', { name: `Sealed ${i}`, isEncrypted: true, encryptionPassword: PASSWORD }),
        ),
        a.post('/users', { email: 'one@example.com', name: 'One', role: 'member', password: PASSWORD }),
        b.post('/users', { email: 'two@example.com', name: 'Two', role: 'member', password: PASSWORD }),
      ];
      // Requests that hash nothing answer while the hasher is full.
      const [list, health, plain] = await Promise.all([
        a.get('/forms'),
        app.request('GET', '/healthz'),
        b.post('/forms', { name: 'Plain' }),
      ]);
      assert.equal(list.status, 200);
      assert.equal(health.status, 200);
      assert.equal(plain.status, 200);

      const answers = await Promise.all(hashing);
      const created = answers.filter((r) => r.status === 200);
      const busy = answers.filter((r) => r.status !== 200);
      assert.ok(
        created.length >= 3,
        `the running hash and the two queued ones finish: ${answers.map((r) => r.status).join(',')}`,
      );
      assert.ok(busy.length >= 1, `more than the queue holds is refused: ${answers.map((r) => r.status).join(',')}`);
      for (const res of busy) {
        assertError(res, 503, 'hashing_busy', 'refused hash');
        assert.ok(Number(res.headers.get('retry-after')) >= 1, 'Retry-After says when to come back');
      }
      // A refused creation wrote nothing.
      const forms = [...(await a.get('/forms')).body.forms, ...(await b.get('/forms')).body.forms].filter((f) =>
        f.name.startsWith('Sealed'),
      );
      const users = [...(await a.get('/users')).body.users, ...(await b.get('/users')).body.users].filter(
        (u) => u.role === 'member',
      );
      assert.equal(forms.length + users.length, created.length);

      // Once the queue has drained, hashing works again.
      const again = await a.post('/forms', { name: 'Later', isEncrypted: true, encryptionPassword: PASSWORD });
      assert.equal(again.status, 200, again.text);
    } finally {
      await app.close();
    }
  });

  it('counts every password hash of an account against its budget: 429 after it, other accounts untouched', async () => {
    const app = await startTestApp({ ACCOUNT_HASH_ATTEMPTS: '4', ENCRYPTION_PASSWORD_ATTEMPTS: '100' });
    try {
      // To the start of a 15-minute budget window, so that the hashes below do not straddle two
      // (a slow run that crossed a boundary once found the fifth hash in a new, empty window).
      toWindowStart(app.server.ctx.clock, 900_000);
      const [a, b] = [await app.account('A'), await app.account('B')];
      const sealed = (name: string) => ({
        name,
        isEncrypted: true,
        encryptionPassword: PASSWORD,
        fields: [{ type: 'text', label: 'T' }],
      });
      const f = await a.post('/forms', sealed('One'));
      assert.equal(f.status, 200, f.text);
      assert.equal((await a.post('/forms', sealed('Two'))).status, 200);
      assert.equal(
        (await a.post('/users', { email: 'm@example.com', name: 'M', role: 'member', password: PASSWORD })).status,
        200,
      );
      // Checking a form's password is a hash too (the form's own limit is far from spent).
      const s = await a.post(`/forms/${f.body.id}/submissions`, { fields: [{ id: f.body.fields[0].id, value: 'x' }] });
      assert.equal(s.status, 200, s.text);
      assertError(
        await a.get(`/submissions/${s.body.id}`, { headers: { 'x-formwork-encryption-password': 'a wrong guess' } }),
        401,
        'encryption_password_invalid',
        'fourth hash',
      );

      const refused = await a.post('/forms', sealed('Three'));
      assertError(refused, 429, 'rate_limited', 'fifth hash');
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assertError(
        await a.put(`/forms/${f.body.id}`, { encryptionPassword: PASSWORD, newEncryptionPassword: 'another password' }),
        429,
        'rate_limited',
        're-key',
      );
      assertError(
        await a.post('/users', { email: 'n@example.com', name: 'N', role: 'member', password: PASSWORD }),
        429,
        'rate_limited',
        'user password',
      );
      // Nothing that hashes no password is held back, and the refused form was not made.
      assert.equal((await a.post('/forms', { name: 'Plain' })).status, 200);
      assert.deepEqual((await a.get('/forms')).body.forms.map((x: { name: string }) => x.name).sort(), [
        'One',
        'Plain',
        'Two',
      ]);
      assert.equal((await b.post('/forms', sealed('Theirs'))).status, 200, 'another account has its own budget');
    } finally {
      await app.close();
    }
  });
  it('passes sign-in through the hasher: one derivation for an email in several accounts or in none, and 503 on the page when it is full', async () => {
    const app = await startTestApp({ HASH_CONCURRENCY: '1', HASH_QUEUE_LIMIT: '0' });
    try {
      const owner = await app.account('Alpha');
      const client = await registerClient(owner);
      const email = `multi-${randomBytes(4).toString('hex')}@example.com`;
      for (const acc of [owner, await app.account('Beta')]) {
        const made = await acc.post('/users', { email, name: 'Pat', role: 'member', password: PASSWORD });
        assert.equal(made.status, 200, made.text);
      }
      // Every derivation the hasher runs, by its salt.
      const hasher = app.server.ctx.hasher;
      const salts: string[] = [];
      const scrypt = hasher.scrypt.bind(hasher);
      hasher.scrypt = (password, salt, ...rest) => {
        salts.push(salt.toString('base64'));
        return scrypt(password, salt, ...rest);
      };
      const signIn = async (address: string, password: string) => {
        const browser = new Browser(app.url);
        const form = readForm((await browser.fetch(authorizeUrl(client))).text);
        return browser.fetch(form.action, { method: 'POST', form: { ...form.fields, email: address, password } });
      };

      // The password of both users: the chooser, after one derivation (the two hashes share a salt).
      const both = await signIn(email, PASSWORD);
      assert.equal(both.status, 200, both.text);
      assert.match(both.text, /Alpha/);
      assert.match(both.text, /Beta/);
      assert.equal(salts.length, 1, 'one derivation checks both accounts');
      // A wrong password, and an email in no account (the dummy hash): one derivation each.
      assert.equal((await signIn(email, 'a wrong guess')).status, 401);
      assert.equal((await signIn(`nobody-${randomBytes(4).toString('hex')}@example.com`, PASSWORD)).status, 401);
      assert.equal(salts.length, 3);

      // The one slot taken and no queue: the sign-in page says to come back. The slot is held by
      // small derivations one after another (each takes it again in the microtasks that freed it,
      // before the next request is read), not by one long one: that burned a core for half a
      // minute of a loaded CI run.
      let hold = true;
      const holding = (async () => {
        while (hold) await scrypt('held', randomBytes(16), 32, { N: 2 ** 14, r: 8, p: 1 });
      })();
      let busy: Awaited<ReturnType<typeof signIn>>;
      try {
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal(hasher.load.running, 1);
        busy = await signIn(email, PASSWORD);
        assert.equal(hasher.load.running, 1, 'the slot was still taken when the sign-in was refused');
      } finally {
        hold = false;
        await holding;
      }
      assert.equal(busy.status, 503, busy.text);
      assert.ok(Number(busy.headers.get('retry-after')) >= 1, 'Retry-After says when to come back');
      assert.match(busy.text, /Too many people are signing in right now/);
      assert.ok(!busy.headers.getSetCookie().some((line) => line.startsWith('fw_session=')), 'no session');
      assert.equal((await signIn(email, PASSWORD)).status, 200, 'once the slot is free, sign-in works again');
    } finally {
      await app.close();
    }
  });
});
