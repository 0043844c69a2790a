/**
 * The paths of the original service's v2 API that Formwork answers in v2's own manner
 * (src/modules/v2). Every other /api/v2 path is the older alias of a v2025 route (app.ts).
 */
export const V2_PREFIX = '/api/v2';

/** Where a path ending in .xml is sent: it answers 406 not_acceptable. */
export const V2_XML_PATH = `${V2_PREFIX}/.xml`;

const SHAPES = [
  '/form',
  '/form/*',
  '/form/*/copy',
  '/form/*/basic',
  '/form/*/html',
  '/form/*/field',
  '/field/*',
  '/form/*/submission',
  '/submission/*',
  '/form/*/count',
  '/folder',
  '/folder/*',
  '/form/*/webhook',
  '/webhook/*',
  '/form/*/confirmation',
  '/confirmation/*',
  '/form/*/notification',
  '/notification/*',
  '/form/*/partialsubmission',
  '/partialsubmission/*',
  '/download/*/*',
  '/download/*/*/*',
  '/portal',
  '/portal/*',
  '/portal/*/copy',
  '/portal/*/form',
  '/portal/*/form/*',
  '/portal/*/user',
  '/portal/*/user/*',
  '/smartlist',
  '/smartlist/*',
  '/smartlist/*/option',
  '/smartlist/*/option/*',
  '/smartlist/*/bulkoptions',
  '/smartlist/*/alloptions',
];

const PATTERN = new RegExp(`^(?:${SHAPES.map((s) => s.replace(/\*/g, '[^/]+')).join('|')})/?$`);

/** Whether a path below /api/v2 (without .json) is one of v2's own. */
export function isV2Path(path: string): boolean {
  return PATTERN.test(path);
}

/**
 * Older clients call /api/v2/... and may end any path in .json (also as `/.json`), in any
 * case, as .xml is matched. v2's own paths keep their prefix and reach the v2 module; .xml
 * reaches the 406 route; the OAuth endpoints are the same as at /oauth2; anything else is
 * served by the v2025 route of the same path.
 */
export function rewriteV2Url(url: string, v2025Prefix: string): string {
  if (!url.startsWith(V2_PREFIX) || !/^(\/|$|\?|\.json|\.xml)/i.test(url.slice(V2_PREFIX.length))) return url;
  if (/^\/api\/v2\/openapi\.json(\?|$)/.test(url)) return url;
  const q = url.indexOf('?');
  const full = q === -1 ? url : url.slice(0, q);
  const rest = q === -1 ? '' : url.slice(q);
  if (/\.xml$/i.test(full)) return `${V2_XML_PATH}${rest}`;
  const path = full.replace(/\/?\.json$/i, '');
  const below = path.slice(V2_PREFIX.length);
  if (/^\/oauth2\/(authorize|token)\/?$/.test(below)) return `${below}${rest}`;
  if (isV2Path(below)) return `${path}${rest}`;
  return `${v2025Prefix}${below}${rest}`;
}
