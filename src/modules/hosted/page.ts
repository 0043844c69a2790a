import { escapeHtml as e, paragraphs } from './escape.js';

/** Whole documents around the form: the page at a form's URL, its closed page and its confirmation. */

export interface Assets {
  css: string;
  js: string;
}

/** A form's theme on its page (hosted/theme.ts): its style sheet's URL and its logo. */
export interface ThemeAssets {
  css: string;
  logoUrl: string | null;
}

function document(opts: {
  title: string;
  lang?: string;
  assets: Assets;
  theme?: ThemeAssets;
  body: string;
  script: boolean;
}): string {
  return `<!doctype html>
<html lang="${e(opts.lang ?? 'en')}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${e(opts.title)}</title>
<link rel="stylesheet" href="${e(opts.assets.css)}">
${opts.theme ? `<link rel="stylesheet" href="${e(opts.theme.css)}">\n` : ''}${opts.script ? `<script src="${e(opts.assets.js)}" defer></script>` : ''}
</head>
<body class="fw-body">
<main class="fw-card">
${opts.body}
</main>
<p class="fw-footer">Powered by Formwork · Your answers go only to the owner of this form.</p>
</body>
</html>
`;
}

export function formPage(opts: {
  name: string;
  description?: string;
  lang?: string;
  assets: Assets;
  theme?: ThemeAssets;
  form: string;
}): string {
  const logo = opts.theme?.logoUrl ? `<img class="fw-logo" src="${e(opts.theme.logoUrl)}" alt="">` : '';
  return document({
    title: opts.name,
    lang: opts.lang,
    assets: opts.assets,
    theme: opts.theme,
    script: true,
    body: `${logo}<h1 class="fw-title">${e(opts.name)}</h1>${opts.description ? `<div class="fw-description">${paragraphs(opts.description)}</div>` : ''}
${opts.form}`,
  });
}

export function closedPage(opts: {
  title: string;
  heading: string;
  message: string;
  lang?: string;
  assets: Assets;
}): string {
  return document({
    title: opts.title,
    lang: opts.lang,
    assets: opts.assets,
    script: false,
    body: `<h1 class="fw-title">${e(opts.heading)}</h1><div class="fw-closed" role="status">${paragraphs(opts.message)}</div>`,
  });
}

export function confirmationPage(opts: { name: string; message: string; lang?: string; assets: Assets }): string {
  return document({
    title: `${opts.name}: sent`,
    lang: opts.lang,
    assets: opts.assets,
    script: false,
    body: `<div class="fw-done" role="status"><div class="fw-check" aria-hidden="true">✓</div><h1 class="fw-title">${e(opts.name)}</h1>${paragraphs(opts.message)}</div>`,
  });
}

export const DEFAULT_SUCCESS = 'Thank you! Your answers were received.';
