import type { Config } from '../../config.js';

/**
 * The hosted pages' headers. Scripts and styles only from the service itself (no inline
 * script or style, no eval); uploads go to the service or, with S3, to the bucket; a form
 * may be framed by any site (forms are meant to be embedded), unlike the sign-in pages.
 */
export function pagePolicy(config: Pick<Config, 'storage'>, redirectUrl?: string, logoOrigin?: string): string {
  const connect = ["'self'"];
  if (config.storage.driver === 's3') {
    const s3 = config.storage.s3;
    connect.push(
      s3.endpoint
        ? new URL(s3.endpoint).origin
        : `https://${s3.bucket}.s3.${s3.region}.amazonaws.com https://s3.${s3.region}.amazonaws.com`,
    );
  }
  const formAction = ["'self'"];
  // Browsers check a plain form post's redirect against form-action too. One stored before the
  // API checked it as a browser parses it names nothing: its page is served, without it.
  if (redirectUrl && URL.canParse(redirectUrl)) formAction.push(new URL(redirectUrl).origin);
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    // A theme's logo (themes/css.ts) may come from its own site.
    `img-src 'self' data: blob:${logoOrigin ? ` ${logoOrigin}` : ''}`,
    `connect-src ${connect.join(' ')}`,
    `form-action ${formAction.join(' ')}`,
    "base-uri 'none'",
    "object-src 'none'",
    'frame-ancestors *',
  ].join('; ');
}

export function pageHeaders(
  config: Pick<Config, 'storage'>,
  redirectUrl?: string,
  logoOrigin?: string,
): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': pagePolicy(config, redirectUrl, logoOrigin),
    // Prefill and resume tokens are in the page's URL: no Referer takes them elsewhere.
    'referrer-policy': 'no-referrer',
  };
}
