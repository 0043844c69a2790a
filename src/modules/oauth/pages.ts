import { SCOPE_MEANINGS, type Scope } from '../../http/access.js';

/** The authorization endpoint's pages: plain server-rendered HTML, no script. */

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function hidden(fields: Record<string, string | undefined>): string {
  return Object.entries(fields)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n      ');
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${escapeHtml(title)} · Formwork</title>
  <style>
    body { font: 16px/1.5 system-ui, sans-serif; background: #f4f5f7; color: #1d2330; margin: 0; }
    main { max-width: 26rem; margin: 4rem auto; background: #fff; padding: 2rem; border-radius: 8px; box-shadow: 0 1px 3px #0002; }
    h1 { font-size: 1.3rem; margin-top: 0; }
    label { display: block; margin: 1rem 0 .25rem; font-weight: 600; }
    input[type=email], input[type=password] { width: 100%; box-sizing: border-box; padding: .5rem; font-size: 1rem; }
    button { margin-top: 1.25rem; padding: .55rem 1.1rem; font-size: 1rem; cursor: pointer; }
    .error { color: #a01919; background: #fdeaea; padding: .5rem .75rem; border-radius: 4px; }
    .actions { display: flex; gap: .75rem; }
    code { background: #eef; padding: 0 .25rem; }
  </style>
</head>
<body>
  <main>
${body}
  </main>
</body>
</html>
`;
}

export function errorPage(message: string): string {
  return page(
    'Cannot authorize',
    `    <h1>This authorization request cannot go on</h1>
    <p class="error" role="alert">${escapeHtml(message)}</p>
    <p>The application that sent you here is misconfigured. Nothing was shared with it.</p>`,
  );
}

export function signInPage(opts: {
  clientName: string;
  csrf: string;
  params: Record<string, string | undefined>;
  email?: string;
  error?: string;
}): string {
  return page(
    'Sign in',
    `    <h1>Sign in to continue to ${escapeHtml(opts.clientName)}</h1>
    ${opts.error ? `<p class="error" role="alert">${escapeHtml(opts.error)}</p>` : ''}
    <form method="post" action="/oauth2/sign-in">
      ${hidden({ ...opts.params, csrf_token: opts.csrf })}
      <label for="email">Email</label>
      <input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(opts.email ?? '')}">
      <label for="password">Password</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required>
      <button type="submit">Sign in</button>
    </form>`,
  );
}

/** After a sign-in whose email and password fit users of several accounts: which one to continue as. */
export function accountChooserPage(opts: {
  clientName: string;
  csrf: string;
  params: Record<string, string | undefined>;
  email: string;
  choice: string;
  accounts: { userId: number; accountName: string }[];
}): string {
  const buttons = opts.accounts
    .map((a) => `<button type="submit" name="user" value="${a.userId}">${escapeHtml(a.accountName)}</button>`)
    .join('\n        ');
  return page(
    'Choose an account',
    `    <h1>Which account should ${escapeHtml(opts.clientName)} use?</h1>
    <p><strong>${escapeHtml(opts.email)}</strong> signs in to more than one Formwork account with this password. Choose one:</p>
    <form method="post" action="/oauth2/sign-in">
      ${hidden({ ...opts.params, csrf_token: opts.csrf, email: opts.email, choice: opts.choice })}
      <div class="actions">
        ${buttons}
      </div>
    </form>`,
  );
}

export function consentPage(opts: {
  clientName: string;
  userEmail: string;
  accountName: string;
  scopes: Scope[];
  csrf: string;
  params: Record<string, string | undefined>;
}): string {
  const items = opts.scopes
    .map((s) => `<li><code>${escapeHtml(s)}</code>: ${escapeHtml(SCOPE_MEANINGS[s])}</li>`)
    .join('\n      ');
  return page(
    'Authorize',
    `    <h1>${escapeHtml(opts.clientName)} wants to access your Formwork account</h1>
    <p>Signed in as <strong>${escapeHtml(opts.userEmail)}</strong> (account <strong>${escapeHtml(opts.accountName)}</strong>). If you allow it, the application may:</p>
    <ul>
      ${items}
    </ul>
    <p>It acts within your own permissions and never sees your password.</p>
    <form method="post" action="/oauth2/authorize">
      ${hidden({ ...opts.params, csrf_token: opts.csrf })}
      <div class="actions">
        <button type="submit" name="decision" value="allow">Allow</button>
        <button type="submit" name="decision" value="deny">Deny</button>
      </div>
    </form>`,
  );
}
