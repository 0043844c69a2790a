/**
 * The OAuth authorization code flow over plain HTTP, as a browser would run it: a cookie
 * jar, the sign-in and consent forms read from the pages, redirects taken by hand.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import type { TestAccount, TestApp } from './helpers.js';

export const REDIRECT = 'http://127.0.0.1:9/callback';

export interface Client {
  id: number;
  clientId: string;
  clientSecret: string;
}

export async function registerClient(
  owner: TestAccount,
  redirectUris = [REDIRECT],
  name = 'Acme Sync',
  requirePkce?: boolean,
): Promise<Client> {
  const res = await owner.post<Client>('/oauth-clients', {
    name,
    redirectUris,
    ...(requirePkce !== undefined && { requirePkce }),
  });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** A user of the owner's account who can sign in, with this password. */
export async function userWithPassword(
  owner: TestAccount,
  role: 'admin' | 'member' = 'admin',
): Promise<{ id: number; email: string; password: string }> {
  const email = `u${randomBytes(5).toString('hex')}@example.com`;
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const res = await owner.post<{ id: number }>('/users', { email, name: 'Pat Doe', role, password });
  assert.equal(res.status, 200, res.text);
  return { id: res.body.id, email, password };
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export class Browser {
  private cookies = new Map<string, string>();

  constructor(private readonly base: string) {}

  async fetch(
    path: string,
    init: { method?: string; form?: Record<string, string> } = {},
  ): Promise<{ status: number; location: string | null; text: string; headers: Headers }> {
    const headers: Record<string, string> = {};
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const res = await fetch(path.startsWith('http') ? path : `${this.base}${path}`, {
      method: init.method ?? 'GET',
      headers,
      body,
      redirect: 'manual',
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (/Max-Age=0/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return { status: res.status, location: res.headers.get('location'), text: await res.text(), headers: res.headers };
  }
}

/** Every hidden input and the form's action, from a page. */
export function readForm(html: string): { action: string; fields: Record<string, string> } {
  const action = /<form method="post" action="([^"]+)"/.exec(html)?.[1];
  assert.ok(action, `no form on the page:\n${html.slice(0, 2000)}`);
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields[m[1]!] = m[2]!.replace(/&#(\d+);/g, (_, c: string) => String.fromCharCode(Number(c)));
  }
  return { action, fields };
}

/**
 * An authorization request, with a PKCE challenge unless params say otherwise (clients must
 * send one unless registered with requirePkce false); pass undefined to leave a parameter out.
 */
export function authorizeUrl(client: Client, params: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  const all = {
    client_id: client.clientId,
    redirect_uri: REDIRECT,
    response_type: 'code',
    state: 'st-1',
    scope: 'forms:read forms:write submissions:read',
    code_challenge: pkce().challenge,
    code_challenge_method: 'S256',
    ...params,
  };
  for (const [k, v] of Object.entries(all)) if (v !== undefined) q.set(k, v);
  return `/oauth2/authorize?${q.toString()}`;
}

/** Signs in on the page, consents, and returns the redirect that carries the code. */
export async function authorize(
  app: TestApp,
  client: Client,
  user: { email: string; password: string },
  params: Record<string, string | undefined> = {},
  decision: 'allow' | 'deny' = 'allow',
): Promise<URL> {
  const browser = new Browser(app.url);
  const signIn = await browser.fetch(authorizeUrl(client, params));
  assert.equal(signIn.status, 200, signIn.text);
  const form = readForm(signIn.text);
  assert.equal(form.action, '/oauth2/sign-in');
  const signedIn = await browser.fetch(form.action, {
    method: 'POST',
    form: { ...form.fields, email: user.email, password: user.password },
  });
  assert.equal(signedIn.status, 303, signedIn.text);
  const consent = await browser.fetch(signedIn.location!);
  assert.equal(consent.status, 200, consent.text);
  const consentForm = readForm(consent.text);
  assert.equal(consentForm.action, '/oauth2/authorize');
  const done = await browser.fetch(consentForm.action, { method: 'POST', form: { ...consentForm.fields, decision } });
  assert.equal(done.status, 303, done.text);
  return new URL(done.location!);
}

export interface TokenReply {
  status: number;
  body: Record<string, any>;
  headers: Headers;
}

export async function tokenRequest(
  app: TestApp,
  form: Record<string, string>,
  basic?: { id: string; secret: string },
  path = '/oauth2/token',
): Promise<TokenReply> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (basic)
    headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(basic.id)}:${encodeURIComponent(basic.secret)}`).toString('base64')}`;
  const res = await fetch(`${app.url}${path}`, { method: 'POST', headers, body: new URLSearchParams(form).toString() });
  const text = await res.text();
  return {
    status: res.status,
    body: text === '' ? {} : (JSON.parse(text) as Record<string, any>),
    headers: res.headers,
  };
}

export const basicOf = (client: Client) => ({ id: client.clientId, secret: client.clientSecret });

export async function exchangeCode(
  app: TestApp,
  client: Client,
  code: string,
  verifier?: string,
  redirectUri = REDIRECT,
): Promise<TokenReply> {
  return tokenRequest(
    app,
    {
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirectUri,
      ...(verifier ? { code_verifier: verifier } : {}),
    },
    basicOf(client),
  );
}

/** An API call with a bearer token. */
export async function apiStatus(
  app: TestApp,
  token: string,
  method = 'GET',
  path = '/forms',
  body?: unknown,
): Promise<number> {
  const res = await app.request(method, `/api/v2025${path}`, { token, body });
  return res.status;
}
