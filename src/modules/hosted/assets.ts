import { createHash } from 'node:crypto';
import { clientBundle } from './bundle.js';
import type { Assets } from './page.js';
import { FORM_CSS } from './styles.js';

export const CSS_HASH = createHash('sha256').update(FORM_CSS).digest('hex').slice(0, 12);

/** The URLs of the page's style sheet and script: their content's hash in the name, so they are cached for good. */
export async function assetUrls(base = ''): Promise<Assets> {
  const js = await clientBundle();
  return { css: `${base}/assets/form-${CSS_HASH}.css`, js: `${base}/assets/form-${js.hash}.js` };
}
