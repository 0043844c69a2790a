import type { FastifyInstance } from 'fastify';

const DOCS = /^\/docs(\/|\?|$)/;

/**
 * The API page (@fastify/swagger-ui) loads its scripts and styles from /docs/static and the
 * document from /docs/json, with no inline script. Its top bar logo is an SVG with a <style>
 * element, hence inline styles (styles only: scripts stay 'self'). "Try it out" calls the
 * API at PUBLIC_URL.
 */
function docsPolicy(publicUrl: string): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src 'self' ${new URL(publicUrl).origin}`,
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The headers of registerSecurityHeaders that every answer carries, whatever its route. */
export function everyAnswersHeaders(publicUrl: string): Record<string, string> {
  return {
    'x-content-type-options': 'nosniff',
    ...(publicUrl.startsWith('https:') ? { 'strict-transport-security': 'max-age=31536000' } : {}),
  };
}

/**
 * Headers on every answer, errors and unknown routes included:
 * - X-Content-Type-Options: nosniff, so that no answer is ever read as another type;
 * - Cache-Control: no-store unless the route chose its own (form reads revalidate by ETag,
 *   the OAuth metadata is public): answers carry account data and tokens;
 * - a CSP and frame protection on /docs;
 * - Strict-Transport-Security when PUBLIC_URL is https (browsers ignore it over plain http,
 *   so it is safe behind a proxy that terminates TLS).
 * The hosted OAuth pages set their own CSP and frame protection.
 */
export function registerSecurityHeaders(app: FastifyInstance, publicUrl: string): void {
  const always = everyAnswersHeaders(publicUrl);
  const docs = docsPolicy(publicUrl);
  app.addHook('onSend', (request, reply, _payload, done) => {
    void reply.headers(always);
    if (DOCS.test(request.url)) {
      reply.header('content-security-policy', docs);
      reply.header('x-frame-options', 'DENY');
    } else if (!reply.hasHeader('cache-control')) {
      reply.header('cache-control', 'no-store');
    }
    done();
  });
}
