/** Users of an account, their roles and members' form permissions, through the API. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createAccount, createPersonalToken } from '../src/modules/accounts/service.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

let app: TestApp;
let owner: TestAccount;
const email = () => `user-${randomBytes(5).toString('hex')}@example.com`;

before(async () => {
  app = await startTestApp();
  owner = await app.account();
});
after(() => app.close());

async function tokenOf(userId: number): Promise<string> {
  return (await createPersonalToken(app.server.ctx, userId)).token;
}
const as = (token: string) => ({
  get: (path: string) => app.request('GET', `/api/v2025${path}`, { token }),
  post: (path: string, body: unknown) => app.request('POST', `/api/v2025${path}`, { token, body }),
  put: (path: string, body: unknown) => app.request('PUT', `/api/v2025${path}`, { token, body }),
  delete: (path: string) => app.request('DELETE', `/api/v2025${path}`, { token }),
});

describe(`users (${dialectName})`, () => {
  it('lists the owner, adds users with a role, never shows a password', async () => {
    const address = email();
    const created = await owner.post('/users', {
      email: address.toUpperCase(),
      name: ' Max ',
      role: 'member',
      password: 'long enough',
    });
    assert.equal(created.status, 200, created.text);
    assert.equal(created.body.email, address);
    assert.equal(created.body.name, 'Max');
    assert.equal(created.body.role, 'member');
    assert.equal(created.body.canSignIn, true);
    assert.ok(!created.text.includes('long enough'));
    assert.ok(!('password' in created.body));
    const list = await owner.get('/users');
    assert.equal(list.body.users[0].role, 'owner');
    assert.ok(list.body.users.some((u: { id: number }) => u.id === created.body.id));
    assert.equal((await owner.get(`/users/${created.body.id}`)).body.email, address);
  });

  it('refuses a taken email with 409, the owner role, and a short password', async () => {
    const address = email();
    assert.equal((await owner.post('/users', { email: address, name: 'A', role: 'member' })).status, 200);
    const dup = await owner.post('/users', { email: address, name: 'B', role: 'member' });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.code, 'email_taken');
    assert.equal((await owner.post('/users', { email: email(), name: 'C', role: 'owner' })).status, 400);
    assert.equal(
      (await owner.post('/users', { email: email(), name: 'C', role: 'member', password: 'short' })).status,
      400,
    );
    assert.equal((await owner.post('/users', { email: 'not an email', name: 'C', role: 'member' })).status, 400);
    // A name of spaces would be stored as nothing: refused, as for tokens and clients.
    const blank = await owner.post('/users', { email: email(), name: '   ', role: 'member' });
    assert.equal(blank.status, 400);
    assert.deepEqual(blank.body.details, [{ property: 'body.name', message: 'must not be blank' }]);
    const made = await owner.post('/users', { email: email(), name: ' Dee ', role: 'member' });
    assert.equal(made.body.name, 'Dee');
    const renamed = await owner.put(`/users/${made.body.id}`, { name: ' \t ' });
    assert.equal(renamed.status, 400);
    assert.equal((await owner.get(`/users/${made.body.id}`)).body.name, 'Dee', 'nothing changed');
  });

  it('keeps emails unique within an account only, and tells nothing about other accounts', async () => {
    const address = email();
    const other = await app.account('Elsewhere');
    assert.equal(
      (await other.post('/users', { email: address, name: 'There', role: 'admin', password: 'other password' })).status,
      200,
    );
    // The same person may be a user here too; the answer is the same as for an unknown email.
    const here = await owner.post('/users', { email: address.toUpperCase(), name: 'Here', role: 'member' });
    assert.equal(here.status, 200, here.text);
    assert.equal(here.body.email, address);
    const again = await owner.post('/users', { email: address, name: 'Twice', role: 'member' });
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'email_taken');
    assert.equal(
      (await other.get('/users')).body.users.filter((u: { email: string }) => u.email === address).length,
      1,
    );
    // A new account may be made for an email that other accounts have users with.
    const made = await createAccount(app.server.ctx, { name: 'Third', email: address }, app.server.ctx.hasher.kdf());
    assert.notEqual(made.userId, here.body.id);
  });

  it('protects the owner and keeps anyone from changing their own role or removing themselves', async () => {
    const admin = await owner.post('/users', { email: email(), name: 'Admin', role: 'admin' });
    const adminApi = as(await tokenOf(admin.body.id));
    const ownerId = owner.userId;
    assert.equal((await adminApi.put(`/users/${ownerId}`, { role: 'member' })).body.code, 'owner_protected');
    assert.equal((await adminApi.delete(`/users/${ownerId}`)).body.code, 'owner_protected');
    assert.equal((await adminApi.put(`/users/${ownerId}`, { password: 'taken over!' })).body.code, 'owner_protected');
    const ownerName = (await owner.get(`/users/${ownerId}`)).body.name;
    const renamed = await adminApi.put(`/users/${ownerId}`, { name: 'Not the owner any more' });
    assert.equal(renamed.status, 403, renamed.text);
    assert.equal(renamed.body.code, 'owner_protected');
    assert.equal((await owner.get(`/users/${ownerId}`)).body.name, ownerName, 'the name is unchanged');
    assert.equal((await adminApi.put(`/users/${admin.body.id}`, { role: 'member' })).body.code, 'own_role');
    assert.equal((await adminApi.delete(`/users/${admin.body.id}`)).body.code, 'own_user');
    // The owner may rename themselves and set their own password.
    assert.equal((await owner.put(`/users/${ownerId}`, { name: 'Owner', password: 'new secret 1' })).status, 200);
  });

  it('gives members levels on forms, replaces them, takes them away; admins hold every level', async () => {
    const form = await owner.post('/forms', { name: 'Levels' });
    const member = await owner.post('/users', { email: email(), name: 'M', role: 'member' });
    const path = `/users/${member.body.id}/permissions/${form.body.id}`;
    assert.equal((await owner.put(path, { level: 'view' })).body.level, 'view');
    assert.equal((await owner.put(path, { level: 'edit' })).body.level, 'edit');
    const list = await owner.get(`/users/${member.body.id}/permissions`);
    assert.deepEqual(
      list.body.permissions.map((p: { formId: number; level: string }) => [p.formId, p.level]),
      [[form.body.id, 'edit']],
    );
    assert.equal((await owner.put(path, { level: 'owner' })).status, 400);
    assert.equal((await owner.put(`/users/${member.body.id}/permissions/2147483647`, { level: 'view' })).status, 404);
    assert.equal((await owner.delete(path)).status, 200);
    assert.equal((await owner.delete(path)).status, 404);

    const admin = await owner.post('/users', { email: email(), name: 'A', role: 'admin' });
    const refused = await owner.put(`/users/${admin.body.id}/permissions/${form.body.id}`, { level: 'view' });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.code, 'not_a_member');

    // Promoting a member drops the levels it held.
    await owner.put(path, { level: 'full' });
    assert.equal((await owner.put(`/users/${member.body.id}`, { role: 'admin' })).body.role, 'admin');
    assert.deepEqual((await owner.get(`/users/${member.body.id}/permissions`)).body.permissions, []);
  });

  it('removing a user ends their tokens', async () => {
    const member = await owner.post('/users', { email: email(), name: 'Leaving', role: 'member' });
    const token = await tokenOf(member.body.id);
    assert.equal((await as(token).get('/forms')).status, 200);
    assert.equal((await owner.delete(`/users/${member.body.id}`)).status, 200);
    assert.equal((await as(token).get('/forms')).status, 401);
    assert.equal((await owner.get(`/users/${member.body.id}`)).status, 404);
  });

  it('lets only the owner and admins manage users and clients', async () => {
    const member = await owner.post('/users', { email: email(), name: 'M', role: 'member' });
    const api = as(await tokenOf(member.body.id));
    for (const res of [
      await api.get('/users'),
      await api.post('/users', { email: email(), name: 'X', role: 'member' }),
      await api.get('/oauth-clients'),
    ]) {
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'admin_required');
    }
  });

  it('registers OAuth clients with exact https or loopback redirect URIs, and shows the secret once', async () => {
    const created = await owner.post('/oauth-clients', {
      name: 'Sync',
      redirectUris: ['https://app.example.com/cb', 'http://127.0.0.1:8000/cb'],
    });
    assert.equal(created.status, 200, created.text);
    assert.match(created.body.clientSecret, /^fw_cs_/);
    assert.match(created.body.clientId, /^fwc_/);
    const read = await owner.get(`/oauth-clients/${created.body.id}`);
    assert.ok(!read.text.includes(created.body.clientSecret));
    assert.ok(!(await owner.get('/oauth-clients')).text.includes(created.body.clientSecret));
    for (const bad of [
      'http://app.example.com/cb',
      'https://app.example.com/cb#frag',
      'not a url',
      'javascript:alert(1)',
    ]) {
      const res = await owner.post('/oauth-clients', { name: 'Bad', redirectUris: [bad] });
      assert.equal(res.status, 400, bad);
      assert.equal(res.body.details[0].property, 'body.redirectUris[0]');
    }
    assert.equal((await owner.post('/oauth-clients', { name: 'None', redirectUris: [] })).status, 400);
    assert.equal((await owner.delete(`/oauth-clients/${created.body.id}`)).status, 200);
    assert.equal((await owner.get(`/oauth-clients/${created.body.id}`)).status, 404);
  });
});
