import { createHash } from 'node:crypto';
import type { Assets } from '../hosted/page.js';
import { escapeHtml as e, paragraphs } from '../hosted/escape.js';

/**
 * The portal page (docs/portals.md): server-rendered HTML in the hosted form page's style (its
 * style sheet, plus a few rules of its own), with no script. It works without JavaScript.
 */

export const PORTAL_CSS = `
.fwp-head { display: flex; align-items: center; gap: 1rem; margin-bottom: .75rem; }
.fwp-avatar { width: 4rem; height: 4rem; border-radius: 12px; object-fit: cover; flex: none; background: #eef2fd; }
.fwp-head .fw-title { margin: 0; }
.fwp-who { display: flex; flex-wrap: wrap; align-items: center; justify-content: space-between; gap: .75rem; padding: .75rem 1rem; margin: 0 0 1.5rem; background: #f3f6fc; border-radius: 8px; }
.fwp-who p { margin: 0; }
.fwp-who form { margin: 0; }
.fwp-forms { list-style: none; padding: 0; margin: 0; display: grid; gap: .9rem; }
.fwp-form { border: 1px solid #e1e5ee; border-radius: 10px; padding: 1rem 1.1rem; }
.fwp-form h2 { font-size: 1.15rem; margin: 0 0 .35rem; }
.fwp-form h2 a { color: var(--fw-accent); }
.fwp-facts { display: flex; flex-wrap: wrap; gap: .4rem .9rem; margin: 0; padding: 0; list-style: none; color: var(--fw-muted); font-size: .95rem; }
.fwp-tag { display: inline-block; padding: .05rem .55rem; border-radius: 99px; font-size: .85rem; font-weight: 600; }
.fwp-done { background: #e3f3e6; color: #1d6b30; }
.fwp-todo { background: #fff3d6; color: #7a5200; }
.fwp-late { background: #fdf0ef; color: #8f1d15; }
.fwp-required { background: #eef2fd; color: #1b42a6; }
.fwp-signin label { display: block; font-weight: 600; margin-bottom: .35rem; }
.fwp-signin input[type=email] { box-sizing: border-box; width: 100%; padding: .6rem .75rem; font: inherit; border: 1px solid var(--fw-line); border-radius: 8px; }
.fwp-signin input:focus-visible, .fwp-form a:focus-visible, .fw-button:focus-visible { outline: 3px solid #2557d666; outline-offset: 2px; }
.fwp-note { color: var(--fw-muted); font-size: .95rem; }
`;

export const PORTAL_CSS_HASH = createHash('sha256').update(PORTAL_CSS).digest('hex').slice(0, 12);
export const portalCssUrl = (): string => `/portal-assets/portal-${PORTAL_CSS_HASH}.css`;

export interface PortalView {
  name: string;
  description: string | null;
  avatarUrl: string | null;
  /** The page's own address, /p/{portalKey}. */
  path: string;
}

function document(portal: PortalView, assets: Assets, title: string, body: string): string {
  const avatar = portal.avatarUrl
    ? `<img class="fwp-avatar" src="${e(portal.avatarUrl)}" alt="" width="64" height="64">`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex">
<title>${e(title)}</title>
<link rel="stylesheet" href="${e(assets.css)}">
<link rel="stylesheet" href="${e(portalCssUrl())}">
</head>
<body class="fw-body">
<main class="fw-card">
<header class="fwp-head">${avatar}<h1 class="fw-title">${e(portal.name)}</h1></header>
${portal.description ? `<div class="fw-description">${paragraphs(portal.description)}</div>` : ''}
${body}
</main>
<p class="fw-footer">Powered by Formwork · A portal of forms, for the people its owner invited.</p>
</body>
</html>
`;
}

/** The sign-in form: an email address, for a link. */
export function signinPage(
  portal: PortalView,
  assets: Assets,
  opts: { message?: string; error?: string; email?: string } = {},
): string {
  const error = opts.error ? `<div class="fw-alert" role="alert" id="fwp-error"><p>${e(opts.error)}</p></div>` : '';
  const message = opts.message ? `<div class="fw-resume" role="status"><p>${e(opts.message)}</p></div>` : '';
  return document(
    portal,
    assets,
    `Sign in: ${portal.name}`,
    `${error}${message}<form class="fwp-signin" method="post" action="${e(portal.path)}/signin">
<p class="fwp-note">Enter the email address you were invited with, and we will email you a link to sign in. No password is needed.</p>
<label for="fwp-email">Email address</label>
<input type="email" id="fwp-email" name="email" autocomplete="email" required maxlength="254" value="${e(opts.email ?? '')}"${opts.error ? ' aria-invalid="true" aria-describedby="fwp-error"' : ''}>
<div class="fw-actions"><button type="submit" class="fw-button">Email me a sign-in link</button></div>
</form>`,
  );
}

/**
 * What a sign-in link opens: who it signs in, and a button that does it (a POST from this
 * page, with the token bound to this browser's cookie). The link itself signs no one in.
 */
export function confirmPage(
  portal: PortalView,
  assets: Assets,
  user: { name: string; email: string },
  fields: { token: string; confirm: string },
): string {
  return document(
    portal,
    assets,
    `Sign in: ${portal.name}`,
    `<form class="fwp-signin" method="post" action="${e(portal.path)}/signin/confirm">
<p>Sign in to this portal as <strong>${e(user.name)}</strong> (${e(user.email)})?</p>
<p class="fwp-note">Continue only if you asked for this link and this is your address. If someone else sent you here, close this page.</p>
<input type="hidden" name="token" value="${e(fields.token)}">
<input type="hidden" name="confirm" value="${e(fields.confirm)}">
<div class="fw-actions"><button type="submit" class="fw-button">Sign in</button></div>
</form>`,
  );
}

export interface PageForm {
  name: string;
  viewKey: string;
  dueDate: string | null;
  overdue: boolean;
  required: boolean;
  submitted: { count: number; last: string } | null;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** An ISO time for people, in UTC (the page has no script to read the reader's zone). */
function shown(iso: string): string {
  const d = new Date(iso);
  const hh = String(d.getUTCHours()).padStart(2, '0');
  const mm = String(d.getUTCMinutes()).padStart(2, '0');
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${hh}:${mm} UTC`;
}

const time = (iso: string) => `<time datetime="${e(iso)}">${e(shown(iso))}</time>`;

/** The signed-in page: the user's forms, whether they have submitted each, and due dates. */
export function portalPage(
  portal: PortalView,
  assets: Assets,
  user: { name: string; email: string },
  forms: PageForm[],
): string {
  const items = forms
    .map((f) => {
      const facts: string[] = [];
      if (f.submitted)
        facts.push(
          `<li><span class="fwp-tag fwp-done">Submitted</span> last on ${time(f.submitted.last)}${f.submitted.count > 1 ? ` (${f.submitted.count} times)` : ''}</li>`,
        );
      else
        facts.push(
          `<li><span class="fwp-tag ${f.overdue ? 'fwp-late' : 'fwp-todo'}">${f.overdue ? 'Overdue' : 'Not submitted yet'}</span></li>`,
        );
      if (f.required) facts.push('<li><span class="fwp-tag fwp-required">Required</span></li>');
      if (f.dueDate) facts.push(`<li>Due ${time(f.dueDate)}</li>`);
      return `<li class="fwp-form"><h2><a href="/f/${e(encodeURIComponent(f.viewKey))}">${e(f.name)}</a></h2><ul class="fwp-facts">${facts.join('')}</ul></li>`;
    })
    .join('\n');
  const list =
    forms.length > 0
      ? `<h2 class="fw-visually-hidden">Your forms</h2><ul class="fwp-forms">\n${items}\n</ul>`
      : '<p class="fwp-note">There are no forms in this portal yet.</p>';
  return document(
    portal,
    assets,
    portal.name,
    `<div class="fwp-who"><p>Signed in as <strong>${e(user.name)}</strong> (${e(user.email)})</p><form method="post" action="${e(portal.path)}/signout"><button type="submit" class="fw-button fw-secondary">Sign out</button></form></div>
${list}`,
  );
}

/** A page that only says something: an unknown portal, a spent link. */
export function messagePage(assets: Assets, title: string, message: string, portal?: PortalView): string {
  const view = portal ?? { name: title, description: null, avatarUrl: null, path: '' };
  return document(view, assets, title, `<div class="fw-closed" role="status">${paragraphs(message)}</div>`);
}
