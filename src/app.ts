import { createServer } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { AppContext } from './context.js';
import { requireAccessRules, SCOPE_MEANINGS } from './http/access.js';
import { BearerTokens, requireBearerToken } from './http/auth.js';
import { EarlyRoutes, readEarlyBodies } from './http/early-routes.js';
import { characterRefusalOfJson, decodeBody, noteJsonBodyText, refuseInvalidCharacters } from './http/characters.js';
import {
  clientErrorHandler,
  frameworkError,
  registerErrorHandling,
  schemaErrorFormatter,
} from './http/error-handler.js';
import { registerSecurityHeaders } from './http/headers.js';
import { trustProxyOf } from './http/request-meta.js';
import { lazyChildLogger, queryRedaction } from './http/logging.js';
import { parseQueryString } from './http/querystring.js';
import { ApiQuota, registerRateLimits } from './http/rate-limit.js';
import { registerReadiness } from './http/readiness.js';
import { registerMetrics, registerRequestId, requestIdOf } from './http/observability.js';
import { registerBodyTimeout, serverTimeouts } from './http/timeouts.js';
import { ErrorBody } from './http/schemas.js';
import { buildSerializer } from './http/serialization.js';
import { refuseBody, takesNoBody, validatorCompiler } from './http/validation.js';
import { emailRoutes } from './modules/emails/routes.js';
import { Confirmation, MailMessage, Notification } from './modules/emails/schemas.js';
import { fieldRoutes } from './modules/fields/routes.js';
import { Field } from './modules/fields/schemas.js';
import { folderRoutes } from './modules/folders/routes.js';
import { Folder } from './modules/folders/schemas.js';
import { earlyFormRead } from './modules/forms/early-read.js';
import { submissionsDeps } from './modules/submissions/definitions.js';
import { earlyCreate } from './modules/submissions/early-create.js';
import { formRoutes } from './modules/forms/routes.js';
import { formReadCaches } from './modules/forms/service.js';
import { hostedForms } from './modules/hosted/module.js';
import { Form } from './modules/forms/schemas.js';
import { oauthClientRoutes } from './modules/oauth-clients/routes.js';
import { OAuthClient } from './modules/oauth-clients/schemas.js';
import { oauthRoutes } from './modules/oauth/routes.js';
import { portalPageRoutes } from './modules/portals/page-routes.js';
import { portalRoutes } from './modules/portals/routes.js';
import { smartListRoutes } from './modules/smartlists/routes.js';
import { SmartList, SmartListOption } from './modules/smartlists/schemas.js';
import { subaccountRoutes } from './modules/subaccounts/routes.js';
import { Subaccount } from './modules/subaccounts/schemas.js';
import { themeRoutes } from './modules/themes/routes.js';
import { Theme } from './modules/themes/schemas.js';
import { Portal, PortalDetails, PortalForm, PortalUser } from './modules/portals/schemas.js';
import { submissionRoutes } from './modules/submissions/routes.js';
import { tokenRoutes } from './modules/tokens/routes.js';
import { PersonalToken } from './modules/tokens/schemas.js';
import { TokenUsage } from './modules/tokens/usage.js';
import { serviceUploadRoute, uploadRoutes } from './modules/uploads/routes.js';
import { Submission, SubmissionListItem } from './modules/submissions/schemas.js';
import { userRoutes } from './modules/users/routes.js';
import { User } from './modules/users/schemas.js';
import { webhookRoutes } from './modules/webhooks/routes.js';
import { rewriteV2Url } from './modules/v2/paths.js';
import { v2Api } from './modules/v2/module.js';
import { V2_TAG } from './modules/v2/route.js';
import { docmergeRoutes } from './modules/docmerge/routes.js';
import { Webhook } from './modules/webhooks/schemas.js';
import { Docmerge } from './modules/docmerge/schemas.js';

export const API_PREFIX = '/api/v2025';

/** See rewriteV2Url: v2's own paths, .json and .xml, and the older alias of the v2025 routes. */
export function rewriteLegacyUrl(url: string): string {
  return rewriteV2Url(url, API_PREFIX);
}

export async function buildApp(ctx: AppContext): Promise<FastifyInstance> {
  const timeouts = serverTimeouts(ctx.config);
  const early = new EarlyRoutes(ctx.metrics, {
    publicUrl: ctx.config.publicUrl,
    logsRequests: ['info', 'debug', 'trace'].includes(ctx.config.logLevel),
    bodyTimeoutMs: ctx.config.requestTimeoutMs,
  });
  const trust = trustProxyOf(ctx.config.trustProxy);
  const app = Fastify({
    // Fastify's own server, but a few hot requests (public GETs, the plain create) are answered before it routes them (EarlyRoutes).
    serverFactory: (handler) => {
      early.handOffTo(handler);
      const server = createServer(timeouts.http, (req, res) => {
        if (!early.handle(req, res)) handler(req, res);
      });
      server.keepAliveTimeout = timeouts.keepAliveTimeout;
      server.requestTimeout = timeouts.requestTimeout;
      return server;
    },
    ...timeouts,
    logger: {
      level: ctx.config.logLevel,
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'req.headers["x-formwork-encryption-password"]',
          'req.headers["x-fs-encryption-password"]',
        ],
        censor: '[redacted]',
      },
      ...queryRedaction,
    },
    // x-request-id from the balancer when sane, else a new one; in every log line as requestId.
    requestIdHeader: false,
    genReqId: requestIdOf,
    logController: new LogController({ requestIdLogLabel: 'requestId' }),
    childLoggerFactory: lazyChildLogger,
    bodyLimit: ctx.config.bodyLimit,
    trustProxy: trust,
    rewriteUrl: (req) => rewriteLegacyUrl(req.url ?? '/'),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200, querystringParser: parseQueryString },
    frameworkErrors: frameworkError,
    clientErrorHandler,
    schemaErrorFormatter,
    // Response serializers built on first use, once per process (see buildSerializer).
    schemaController: { compilersFactory: { buildSerializer } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.decorate('earlyRoutes', early);
  early.logTo(app.log);
  readEarlyBodies(app);
  app.setValidatorCompiler(validatorCompiler);
  registerRequestId(app);
  registerMetrics(app, ctx);
  registerErrorHandling(app);
  registerBodyTimeout(app, ctx.config.requestTimeoutMs);
  registerSecurityHeaders(app, ctx.config.publicUrl);
  refuseInvalidCharacters(app);

  // Clients that send Content-Type: application/json on every request also send it with no body.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  /** The same parser for text in hand (the early create's): throws what it fails with. */
  const parseJsonText = (text: string): unknown => {
    let parsed: { error: Error | null; body?: unknown } | undefined;
    parseJson(undefined as never, text, (error, body) => (parsed = { error, body }));
    if (!parsed || parsed.error) throw parsed?.error ?? new Error('the JSON parser did not answer');
    return parsed.body;
  };
  app.removeAllContentTypeParsers(); // JSON only: any other body type gets a clear 415
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    let text: string;
    try {
      text = decodeBody(body as Buffer);
    } catch (error) {
      return done(error as Error);
    }
    if (text === '') return done(null, undefined);
    noteJsonBodyText(req, text);
    parseJson(req, text, (error, body) => done(error && (characterRefusalOfJson(text) ?? error), body));
  });

  for (const schema of [
    ErrorBody,
    Field,
    Form,
    Folder,
    Submission,
    SubmissionListItem,
    User,
    OAuthClient,
    PersonalToken,
    Webhook,
    Docmerge,
    Confirmation,
    Notification,
    MailMessage,
    SmartList,
    SmartListOption,
    Theme,
    Subaccount,
    Portal,
    PortalForm,
    PortalUser,
    PortalDetails,
  ])
    app.addSchema(schema);

  // A route without query parameters still refuses unknown ones, as routes with them do; one
  // without a body, any body with something in it.
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(API_PREFIX)) return;
    if (route.schema && !route.schema.querystring) {
      route.schema.querystring = Type.Object({}, { additionalProperties: false });
    }
    if (takesNoBody(route)) route.preValidation = [refuseBody, ...[route.preValidation ?? []].flat()];
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Formwork API',
        version: '2025.0',
        license: { name: 'MIT', identifier: 'MIT' },
        description:
          'Forms, fields, folders and submissions. Every operation needs `Authorization: Bearer <token>`. ' +
          'The same operations answer under /api/v2, where any path may end in .json. The operations tagged ' +
          `"${V2_TAG}" are the original service's v2 API (its paths, form-encoded bodies and answers; docs/v2.md), ` +
          'at the absolute paths shown.',
      },
      servers: [{ url: `${ctx.config.publicUrl}${API_PREFIX}` }],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'A personal access token (the scopes it was made with, every scope by default) or an OAuth access token',
          },
          oauth2: {
            type: 'oauth2',
            // RFC 8414 has no field saying PKCE is required (only the methods supported), so
            // the metadata's service_documentation (/docs) says it here.
            description:
              'Authorization code flow (RFC 6749) with PKCE (RFC 7636), S256 only. Every authorization request must carry ' +
              'code_challenge and code_challenge_method=S256 unless the application is registered with requirePkce: false ' +
              '(POST or PUT /oauth-clients); a request without them is sent back to the redirect URI with invalid_request. ' +
              `Server metadata: ${ctx.config.publicUrl}/.well-known/oauth-authorization-server.`,
            flows: {
              authorizationCode: {
                authorizationUrl: `${ctx.config.publicUrl}/oauth2/authorize`,
                tokenUrl: `${ctx.config.publicUrl}/oauth2/token`,
                refreshUrl: `${ctx.config.publicUrl}/oauth2/token`,
                scopes: SCOPE_MEANINGS,
              },
            },
          },
        },
      },
      security: [{ bearer: [] }],
    },
    transform: ({ schema, url }) => ({
      schema,
      url: url.startsWith(API_PREFIX) ? url.slice(API_PREFIX.length) || '/' : url,
    }),
    hiddenTag: 'internal',
    // The swagger plugin marks every declared body as required; an operation whose body may be
    // left out (x-formwork-body-optional, copied from its schema) says so.
    transformObject: (documents) => {
      const doc = (documents as { openapiObject?: Record<string, unknown> }).openapiObject ?? {};
      const paths = (doc.paths ?? {}) as Record<string, Record<string, Record<string, unknown>>>;
      // v2's operations keep their full /api/v2 path: they are served from the host itself.
      for (const [path, item] of Object.entries(paths))
        if (path.startsWith('/api/v2/')) (item as Record<string, unknown>).servers = [{ url: ctx.config.publicUrl }];
      for (const item of Object.values(paths))
        for (const op of Object.values(item)) {
          if (typeof op !== 'object' || op === null || Array.isArray(op)) continue;
          const body = op.requestBody as { required?: boolean } | undefined;
          if (op['x-formwork-body-optional'] === true && body) body.required = false;
          // A query parameter with a default is required in its TypeBox object (it is always
          // there once validated), not of the client, which may leave it out.
          for (const param of (op.parameters ?? []) as {
            in?: string;
            required?: boolean;
            schema?: { default?: unknown };
          }[])
            if (param.in === 'query' && param.required === true && param.schema?.default !== undefined)
              param.required = false;
        }
      return doc;
    },
    // Shared schemas keep their names (Form, Field, ...) as OpenAPI components.
    refResolver: {
      buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  app.get('/healthz', { schema: { hide: true } }, async () => {
    await sql`select 1`.execute(ctx.db);
    return { status: 'ok' };
  });
  registerReadiness(app, ctx);
  // The API description holds no account data, so it is public like /docs.
  app.get(`${API_PREFIX}/openapi.json`, { schema: { hide: true } }, () => app.swagger());
  // The same operations under the older prefix, so that its clients find a description where they look.
  app.get('/api/v2/openapi.json', { schema: { hide: true } }, () => ({
    ...app.swagger(),
    servers: [{ url: `${ctx.config.publicUrl}/api/v2` }],
  }));

  await app.register(oauthRoutes(ctx));
  await app.register(serviceUploadRoute(ctx));
  // Hosted forms: the page at each form's url, outside the token API (hosted/routes.ts).
  const hosted = hostedForms(ctx, (error) => app.log.warn({ err: error }, 'could not write form page statistics'));
  app.addHook('onClose', () => hosted.close());
  await app.register(hosted.pages);
  early.add('/f/', hosted.earlyPage);
  app.addHook('preClose', (done) => {
    early.close();
    done();
  });
  // Portal pages: sign-in by emailed link and the signed-in user's forms (portals/page-routes.ts).
  await app.register(portalPageRoutes(ctx));

  const usage = new TokenUsage(ctx.db, ctx.config.tokenUsageFlushSeconds * 1000, (error) =>
    app.log.warn({ err: error }, 'could not write the last use of tokens'),
  );
  // Before the database closes (server.ts closes the app first): the uses since the last flush.
  app.addHook('onClose', () => usage.close());
  const tokens = new BearerTokens(ctx, usage);
  const quota = new ApiQuota(ctx.rateLimiter, ctx.config);
  const formReads = formReadCaches(ctx.config.readCacheBytes);
  early.add(`${API_PREFIX}/forms/`, earlyFormRead(ctx, API_PREFIX, { caches: formReads, tokens, quota }));
  const submissions = submissionsDeps(ctx);
  early.addBody(
    `${API_PREFIX}/forms/`,
    earlyCreate(submissions, API_PREFIX, { tokens, quota, trust, parseJson: parseJsonText, log: app.log }),
  );

  await app.register(
    async (api) => {
      requireBearerToken(api, tokens);
      registerRateLimits(api, quota);
      requireAccessRules(api, ctx.db);
      await api.register(formRoutes(ctx, formReads));
      await api.register(fieldRoutes(ctx));
      await api.register(emailRoutes(ctx));
      await api.register(folderRoutes(ctx));
      await api.register(submissionRoutes(submissions));
      await api.register(uploadRoutes(ctx));
      await api.register(userRoutes(ctx));
      await api.register(oauthClientRoutes(ctx));
      await api.register(tokenRoutes(ctx));
      await api.register(webhookRoutes(ctx));
      await api.register(docmergeRoutes(ctx));
      await api.register(smartListRoutes(ctx));
      await api.register(themeRoutes(ctx));
      await api.register(subaccountRoutes(ctx));
      await api.register(portalRoutes(ctx));
      await api.register(hosted.api);
    },
    { prefix: API_PREFIX },
  );
  // The original service's v2 API, translated onto the same services (docs/v2.md).
  await app.register(v2Api(ctx, tokens, quota, hosted.html));

  return app;
}
