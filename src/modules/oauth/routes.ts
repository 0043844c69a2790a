import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { HashingBusyError } from '../../crypto/hasher.js';
import { unmatchableHash, verifyPasswords } from '../../crypto/secrets.js';
import { AppError, TooManyRequestsError } from '../../errors.js';
import { parseFormBody } from '../../http/characters.js';
import { countAuthFailure, throttle } from '../../http/rate-limit.js';
import { accountName, findUser } from '../accounts/repository.js';
import { findSignInCandidates } from '../users/repository.js';
import { accountChooserPage, consentPage, errorPage, signInPage } from './pages.js';
import {
  authenticateClient,
  checkAuthorization,
  clientCredentials,
  exchangeToken,
  introspect,
  issueCode,
  metadata,
  redirectTo,
  revoke,
  type CheckedAuthorization,
} from './service.js';
import type { FormworkClient } from './model.js';
import { passwordTag, Sessions, type Session } from './session.js';

type Form = Record<string, unknown>;

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'no-referrer',
};
const JSON_ENDPOINTS = new Set(['/oauth2/token', '/oauth2/revoke', '/oauth2/introspect']);

function html(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).headers(PAGE_HEADERS).send(body);
}

function see(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(303).header('location', location).header('cache-control', 'no-store').send();
}

/**
 * The authorization server of spec section 5: the authorization endpoint with its sign-in and
 * consent pages, the token, revocation and introspection endpoints, and RFC 8414 metadata.
 */
export function oauthRoutes(ctx: AppContext): FastifyPluginAsync {
  const issuer = ctx.config.publicUrl;
  const sessions = new Sessions(ctx.config.secretKey, issuer.startsWith('https:'), ctx.clock);

  async function signedInUser(request: FastifyRequest) {
    const session = sessions.read(request);
    if (!session) return undefined;
    const user = await findUser(ctx.db, session.userId);
    if (!user?.password_hash || passwordTag(ctx.config.secretKey, user.password_hash) !== session.passwordTag)
      return undefined;
    return user;
  }

  /** The page for a checked request when the user is (or is not yet) signed in. */
  async function authorizationPage(
    request: FastifyRequest,
    reply: FastifyReply,
    checked: Extract<CheckedAuthorization, { kind: 'ok' }>,
  ) {
    const csrf = sessions.csrfToken(request, reply);
    const user = await signedInUser(request);
    if (!user) return html(reply, 200, signInPage({ clientName: checked.client.name, csrf, params: checked.params }));
    const account = (await accountName(ctx.db, user.account_id)) ?? '';
    return html(
      reply,
      200,
      consentPage({
        clientName: checked.client.name,
        userEmail: user.email,
        accountName: account,
        scopes: checked.scopes,
        csrf,
        params: checked.params,
      }),
    );
  }

  /** Answers a request that cannot go on; undefined when it can. */
  function refuse(reply: FastifyReply, checked: CheckedAuthorization): FastifyReply | undefined {
    if (checked.kind === 'page') return html(reply, 400, errorPage(checked.message));
    if (checked.kind === 'redirect') return see(reply, checked.location);
    return undefined;
  }

  return async (app: FastifyInstance) => {
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_req, body, done) => {
      try {
        done(null, parseFormBody(body as Buffer));
      } catch (error) {
        done(error as Error);
      }
    });

    // The token, revocation and introspection endpoints answer errors as RFC 6749 5.2 says;
    // the pages answer with a page.
    app.setErrorHandler((error: FastifyError, request, reply) => {
      const status = error instanceof AppError ? error.statusCode : (error.statusCode ?? 500);
      if (status >= 500) request.log.error({ err: error }, 'oauth request failed');
      const message = status >= 500 ? 'Something went wrong on our side' : error.message;
      if (error instanceof TooManyRequestsError) reply.header('retry-after', String(error.retryAfterSeconds));
      if (JSON_ENDPOINTS.has(request.routeOptions.url ?? '')) {
        return reply
          .code(status)
          .header('cache-control', 'no-store')
          .send({ error: status >= 500 ? 'server_error' : 'invalid_request', error_description: message });
      }
      return html(reply, status, errorPage(message));
    });

    const hide = { schema: { hide: true } };

    app.get('/.well-known/oauth-authorization-server', hide, async (_req, reply) =>
      reply.header('cache-control', 'public, max-age=3600').send(metadata(ctx)),
    );

    app.get('/oauth2/authorize', hide, async (request, reply) => {
      const checked = await checkAuthorization(ctx.db, request.query as Form, issuer);
      return (
        refuse(reply, checked) ??
        authorizationPage(request, reply, checked as Extract<CheckedAuthorization, { kind: 'ok' }>)
      );
    });

    app.post('/oauth2/sign-in', hide, async (request, reply) => {
      const body = (request.body ?? {}) as Form;
      const checked = await checkAuthorization(ctx.db, body, issuer);
      const refused = refuse(reply, checked);
      if (refused) return refused;
      const ok = checked as Extract<CheckedAuthorization, { kind: 'ok' }>;
      const email = typeof body.email === 'string' ? body.email.trim().toLowerCase() : '';
      const password = typeof body.password === 'string' ? body.password : '';
      const again = (status: number, error: string) =>
        html(
          reply,
          status,
          signInPage({
            clientName: ok.client.name,
            csrf: sessions.csrfToken(request, reply),
            params: ok.params,
            email,
            error,
          }),
        );
      if (!sessions.csrfValid(request, body.csrf_token)) return again(403, 'This form expired. Please sign in again.');
      const signedIn = (session: Session) => {
        sessions.start(reply, session);
        return see(reply, `/oauth2/authorize?${new URLSearchParams(ok.params as Record<string, string>).toString()}`);
      };
      // The account chooser's answer: one of the users the password was proven for.
      if (body.choice !== undefined) {
        const chosen = sessions.readChoice(body.choice, body.csrf_token)?.find((u) => String(u.userId) === body.user);
        const user = chosen && (await findUser(ctx.db, chosen.userId));
        if (
          !chosen ||
          !user?.password_hash ||
          passwordTag(ctx.config.secretKey, user.password_hash) !== chosen.passwordTag
        ) {
          return again(403, 'This choice expired. Please sign in again.');
        }
        return signedIn(chosen);
      }
      try {
        await throttle(ctx.rateLimiter, `signin:ip:${request.ip}`, ctx.config.signInAttempts, 900);
        await throttle(ctx.rateLimiter, `signin:email:${email}`, ctx.config.signInAttempts, 900);
      } catch (error) {
        if (!(error instanceof TooManyRequestsError)) throw error;
        reply.header('retry-after', String(error.retryAfterSeconds));
        return again(
          429,
          `Too many sign-in attempts. Try again in ${Math.ceil(error.retryAfterSeconds / 60)} minutes.`,
        );
      }
      // Emails are unique per account, so the email may name users of several accounts; their
      // hashes share one salt (users/service.ts hashPasswordFor), so this costs one derivation
      // whether the email is in no account, one or many.
      const candidates = email === '' ? [] : await findSignInCandidates(ctx.db, email);
      const kdf = ctx.hasher.kdf();
      let valid: boolean[];
      try {
        valid = await verifyPasswords(
          password,
          candidates.length > 0 ? candidates.map((u) => u.password_hash!) : [unmatchableHash(kdf.params)],
          kdf,
        );
      } catch (error) {
        if (!(error instanceof HashingBusyError)) throw error;
        reply.header('retry-after', String(error.retryAfterSeconds));
        return again(503, `Too many people are signing in right now. Try again in ${error.retryAfterSeconds} seconds.`);
      }
      const matched = candidates.filter((_, i) => valid[i]);
      if (matched.length === 0) return again(401, 'Wrong email or password.');
      const proven = matched.map((u) => ({
        userId: u.id,
        passwordTag: passwordTag(ctx.config.secretKey, u.password_hash!),
      }));
      if (proven.length === 1) return signedIn(proven[0]!);
      const csrf = sessions.csrfToken(request, reply);
      return html(
        reply,
        200,
        accountChooserPage({
          clientName: ok.client.name,
          csrf,
          params: ok.params,
          email,
          choice: sessions.choiceToken(proven, csrf),
          accounts: matched.map((u) => ({ userId: u.id, accountName: u.account_name })),
        }),
      );
    });

    app.post('/oauth2/authorize', hide, async (request, reply) => {
      const body = (request.body ?? {}) as Form;
      const checked = await checkAuthorization(ctx.db, body, issuer);
      const refused = refuse(reply, checked);
      if (refused) return refused;
      const ok = checked as Extract<CheckedAuthorization, { kind: 'ok' }>;
      if (!sessions.csrfValid(request, body.csrf_token))
        return html(reply, 403, errorPage('This form expired. Go back to the application and start again.'));
      const user = await signedInUser(request);
      if (!user) return authorizationPage(request, reply, ok);
      if (body.decision !== 'allow') {
        return see(
          reply,
          redirectTo(ok.params.redirect_uri!, {
            error: 'access_denied',
            error_description: 'The user declined',
            state: ok.params.state,
            iss: issuer,
          }),
        );
      }
      return see(reply, await issueCode(ctx, ok, { id: user.id, accountId: user.account_id }, issuer));
    });

    app.post('/oauth2/sign-out', hide, async (request, reply) => {
      if (!sessions.csrfValid(request, (request.body as Form | undefined)?.csrf_token))
        return html(reply, 403, errorPage('This form expired.'));
      sessions.end(reply);
      return html(reply, 200, errorPage('You are signed out.'));
    });

    /**
     * Counts a failed client authentication that presented credentials (AUTH_FAILURE_ATTEMPTS
     * per address); past the limit, answers 429 with Retry-After and returns true.
     */
    async function refusedAfterFailure(request: FastifyRequest, reply: FastifyReply, body: Form): Promise<boolean> {
      if (!clientCredentials(request.headers.authorization, body)) return false;
      try {
        await countAuthFailure(ctx, request.ip);
        return false;
      } catch (error) {
        if (!(error instanceof TooManyRequestsError)) throw error;
        reply
          .code(429)
          .headers({ 'retry-after': String(error.retryAfterSeconds), 'cache-control': 'no-store' })
          .send({
            error: 'invalid_client',
            error_description: `Client authentication failed too often from this address; try again in ${error.retryAfterSeconds} s`,
          });
        return true;
      }
    }

    app.post('/oauth2/token', hide, async (request, reply) => {
      const body = (request.body ?? {}) as Form;
      const result = await exchangeToken(ctx, { headers: request.headers as Record<string, string>, body });
      if (result.body.error === 'invalid_client' && (await refusedAfterFailure(request, reply, body))) return reply;
      return reply.code(result.status).headers(result.headers).send(result.body);
    });

    /** The authenticated client and the token named in the body of a revocation or introspection request. */
    async function clientAndToken(
      request: FastifyRequest,
      reply: FastifyReply,
    ): Promise<{ client: FormworkClient; token: string } | undefined> {
      const body = (request.body ?? {}) as Form;
      const client = await authenticateClient(ctx, request.headers.authorization, body);
      if (!client) {
        if (await refusedAfterFailure(request, reply, body)) return undefined;
        reply
          .code(401)
          .header('www-authenticate', 'Basic realm="formwork"')
          .send({ error: 'invalid_client', error_description: 'Client authentication failed' });
        return undefined;
      }
      if (typeof body.token !== 'string' || body.token === '') {
        reply.code(400).send({ error: 'invalid_request', error_description: 'Missing parameter: token' });
        return undefined;
      }
      return { client, token: body.token };
    }

    app.post('/oauth2/revoke', hide, async (request, reply) => {
      const found = await clientAndToken(request, reply);
      if (!found) return reply;
      await revoke(ctx, found.client, found.token);
      return reply.code(200).header('cache-control', 'no-store').send();
    });

    app.post('/oauth2/introspect', hide, async (request, reply) => {
      const found = await clientAndToken(request, reply);
      if (!found) return reply;
      return reply.header('cache-control', 'no-store').send(await introspect(ctx, found.client, found.token, issuer));
    });
  };
}
