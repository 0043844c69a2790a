import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import type { PortalRow } from '../../db/schema.js';
import { TooManyRequestsError } from '../../errors.js';
import { throttle } from '../../http/rate-limit.js';
import { assetUrls } from '../hosted/assets.js';
import { imageVersion, sendImage } from '../images/serve.js';
import { pageHeaders } from '../hosted/headers.js';
import { EMAIL } from '../submissions/values.js';
import {
  confirmPage,
  messagePage,
  PORTAL_CSS,
  PORTAL_CSS_HASH,
  portalPage,
  signinPage,
  type PortalView,
} from './page.js';
import * as repo from './repository.js';
import * as session from './session.js';
import { SIGNIN_LINK_TTL_MS } from './signin-link.js';
import { acceptFormPosts } from '../../http/characters.js';

const KeyParams = Type.Object({ portalKey: Type.String({ maxLength: 64 }) }, { additionalProperties: false });

/** What the sign-in request answers, whoever the address belongs to (or not). */
export const SIGNIN_SENT =
  'If this address belongs to a user of this portal, a sign-in link is on its way to it. ' +
  `The link works once, within ${Math.round(SIGNIN_LINK_TTL_MS / 60_000)} minutes.`;

function view(portal: PortalRow): PortalView {
  return {
    name: portal.name,
    description: portal.description,
    avatarUrl:
      portal.avatar_key === null ? null : `/p/${portal.portal_key}/avatar?v=${imageVersion(portal.avatar_key)}`,
    path: `/p/${portal.portal_key}`,
  };
}

/**
 * The portal page, outside the token API: sign-in by emailed link, the signed-in user's forms,
 * sign-out, and the portal's avatar. Answers are HTML pages (the sign-in request also takes
 * JSON); nothing on them tells whether an address is a portal user's.
 */
export function portalPageRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  const secure = ctx.config.publicUrl.startsWith('https:');
  const cookie = (value: string, maxAgeSeconds: number) =>
    `${session.SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
  // Only the confirmation of this portal's sign-in reads it; Lax, so another site's POST goes without it.
  const confirmCookie = (portal: PortalRow, value: string, maxAgeSeconds: number) =>
    `${session.CONFIRM_COOKIE}=${value}; Path=/p/${portal.portal_key}/signin; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
  const ownOrigin = new URL(ctx.config.publicUrl).origin;
  /**
   * Whether the browser says that the request comes from another site: Sec-Fetch-Site, which
   * current browsers send, or else an Origin other than PUBLIC_URL's. The portal's pages send
   * no referrer, so their own posts may carry Origin "null": that alone is no sign.
   */
  const crossSite = (req: FastifyRequest) => {
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined) return site !== 'same-origin';
    const origin = req.headers.origin;
    return origin !== undefined && origin !== 'null' && origin !== ownOrigin;
  };

  return async (app) => {
    acceptFormPosts(app);

    // The hosted form's headers, but never framed: the page acts for a signed-in person (clickjacking).
    const headers = pageHeaders(ctx.config);
    headers['content-security-policy'] = headers['content-security-policy']!.replace(
      'frame-ancestors *',
      "frame-ancestors 'none'",
    );
    async function html(reply: FastifyReply, status: number, body: string) {
      return reply.code(status).headers(headers).header('x-frame-options', 'DENY').send(body);
    }

    async function portalOr404(reply: FastifyReply, key: string): Promise<PortalRow | undefined> {
      const portal = key.length <= 64 ? await repo.findPortalByKey(ctx.db, key) : undefined;
      if (!portal)
        await html(
          reply,
          404,
          messagePage(
            await assetUrls(),
            'Portal not found',
            'There is no portal at this address. Check the link you were given.',
          ),
        );
      return portal;
    }

    app.get(
      '/portal-assets/:file',
      { schema: { hide: true, params: Type.Object({ file: Type.String({ maxLength: 100 }) }) } },
      async (req, reply) => {
        if (req.params.file !== `portal-${PORTAL_CSS_HASH}.css`)
          return reply.code(404).type('text/plain; charset=utf-8').send('Not found');
        return reply
          .headers({
            'cache-control': 'public, max-age=31536000, immutable',
            'content-type': 'text/css; charset=utf-8',
          })
          .send(PORTAL_CSS);
      },
    );

    app.get('/p/:portalKey', { schema: { hide: true, params: KeyParams } }, async (req, reply) => {
      const portal = await portalOr404(reply, req.params.portalKey);
      if (!portal) return reply;
      const assets = await assetUrls();
      const user = await session.sessionUser(
        ctx.db,
        ctx.clock.now(),
        portal,
        session.sessionCookie(req.headers.cookie),
      );
      if (!user) return html(reply, 200, signinPage(view(portal), assets));
      const forms = await session.pageForms(ctx, portal, user);
      return html(reply, 200, portalPage(view(portal), assets, user, forms));
    });

    app.post('/p/:portalKey/signin', { schema: { hide: true, params: KeyParams } }, async (req, reply) => {
      const portal = await portalOr404(reply, req.params.portalKey);
      if (!portal) return reply;
      const plain = req.body instanceof URLSearchParams;
      const raw = plain
        ? (req.body as URLSearchParams).get('email')
        : typeof req.body === 'object' && req.body !== null
          ? (req.body as Record<string, unknown>).email
          : undefined;
      const email = typeof raw === 'string' ? raw.trim() : '';
      const assets = await assetUrls();
      if (email.length > 254 || !EMAIL.test(email)) {
        if (!plain)
          return reply.code(400).send({
            status: 'error',
            error: 'email: must be an email address',
            code: 'validation_failed',
            details: [{ property: 'body.email', message: 'must be an email address' }],
          });
        return html(
          reply,
          400,
          signinPage(view(portal), assets, { error: 'Enter an email address, such as name@example.com.', email }),
        );
      }
      // Per client address, as the hosted forms' submits are; the same for every address asked for.
      try {
        await throttle(ctx.rateLimiter, `portal-signin:${req.ip}`, ctx.config.hosted.publicSubmitPerMinute, 60);
      } catch (error) {
        if (!(error instanceof TooManyRequestsError) || !plain) throw error;
        reply.header('retry-after', String(error.retryAfterSeconds));
        return html(reply, 429, signinPage(view(portal), assets, { error: error.message, email }));
      }
      await session.requestSignin(ctx, portal, email);
      if (!plain) return { status: 'ok', message: SIGNIN_SENT };
      return html(reply, 200, signinPage(view(portal), assets, { message: SIGNIN_SENT }));
    });

    const spentLink = async (reply: FastifyReply, portal: PortalRow) =>
      html(
        reply,
        400,
        signinPage(view(portal), await assetUrls(), {
          error: 'This sign-in link has expired or was already used. Ask for a new one below.',
        }),
      );

    // The emailed link: a page that asks to confirm. Opening it signs no one in and uses
    // nothing up (so mail scanners that open links leave it working).
    app.get(
      '/p/:portalKey/signin',
      {
        schema: {
          hide: true,
          params: KeyParams,
          querystring: Type.Object({ token: Type.Optional(Type.String({ maxLength: 200 })) }),
        },
      },
      async (req, reply) => {
        const portal = await portalOr404(reply, req.params.portalKey);
        if (!portal) return reply;
        const token = req.query.token ?? '';
        const user = token === '' ? undefined : await session.peekSignin(ctx, portal, token);
        if (!user) return spentLink(reply, portal);
        const nonce = session.tokenCookie(req.headers.cookie, session.CONFIRM_COOKIE) ?? session.newConfirmNonce();
        reply.header('set-cookie', confirmCookie(portal, nonce, Math.round(SIGNIN_LINK_TTL_MS / 1000)));
        return html(
          reply,
          200,
          confirmPage(view(portal), await assetUrls(), user, {
            token,
            confirm: session.confirmToken(ctx.config.secretKey, portal.id, nonce),
          }),
        );
      },
    );

    app.post('/p/:portalKey/signin/confirm', { schema: { hide: true, params: KeyParams } }, async (req, reply) => {
      const portal = await portalOr404(reply, req.params.portalKey);
      if (!portal) return reply;
      const body = req.body instanceof URLSearchParams ? req.body : new URLSearchParams();
      const token = body.get('token') ?? '';
      const nonce = session.tokenCookie(req.headers.cookie, session.CONFIRM_COOKIE);
      if (crossSite(req) || !session.confirmTokenValid(ctx.config.secretKey, portal.id, nonce, body.get('confirm')))
        return html(
          reply,
          403,
          signinPage(view(portal), await assetUrls(), {
            error:
              'This sign-in was not confirmed on the page its link opens. Open the link from your email again, ' +
              'in the browser you want to sign in with, and press Sign in there.',
          }),
        );
      const opened = token === '' || token.length > 200 ? undefined : await session.openSignin(ctx, portal, token);
      if (!opened) return spentLink(reply, portal);
      return reply
        .code(303)
        .header('set-cookie', [
          cookie(opened.session, Math.floor((opened.expiresAt - ctx.clock.now()) / 1000)),
          confirmCookie(portal, '', 0),
        ])
        .header('cache-control', 'no-store')
        .header('location', `/p/${portal.portal_key}`)
        .send();
    });

    app.post('/p/:portalKey/signout', { schema: { hide: true, params: KeyParams } }, async (req, reply) => {
      await session.signOut(ctx, session.sessionCookie(req.headers.cookie));
      return reply
        .code(303)
        .header('set-cookie', cookie('', 0))
        .header('cache-control', 'no-store')
        .header('location', `/p/${encodeURIComponent(req.params.portalKey)}`)
        .send();
    });

    app.get(
      '/p/:portalKey/avatar',
      {
        schema: {
          hide: true,
          params: KeyParams,
          querystring: Type.Object({ v: Type.Optional(Type.String({ maxLength: 40 })) }),
        },
      },
      async (req: FastifyRequest<{ Params: { portalKey: string }; Querystring: { v?: string } }>, reply) => {
        const portal =
          req.params.portalKey.length <= 64 ? await repo.findPortalByKey(ctx.db, req.params.portalKey) : undefined;
        if (!portal || portal.avatar_key === null)
          return reply
            .code(404)
            .type('text/plain; charset=utf-8')
            .header('cache-control', 'no-store')
            .send('Not found');
        return sendImage(ctx, reply, portal.avatar_key, portal.avatar_type, req.query.v);
      },
    );
  };
}
