/**
 * The original service's v2 API (docs/v2.md): its paths, parameters, bodies and answers,
 * translated onto the services of the v2025 routes. One resource per file; this file holds
 * what they share: the body parsers, the oauth_token parameter and the .xml refusal
 * (route.ts: how an operation is declared; wire.ts: how values are read and written).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { AppError, UnauthorizedError } from '../../errors.js';
import { requireAccessRules } from '../../http/access.js';
import { requireBearerToken, type BearerTokens } from '../../http/auth.js';
import { decodeBody, parseFormBody } from '../../http/characters.js';
import { registerRateLimits, type ApiQuota } from '../../http/rate-limit.js';
import { validatorCompiler } from '../../http/validation.js';
import { v2EmailRoutes } from './emails.js';
import { v2FieldRoutes } from './fields.js';
import { v2FolderRoutes } from './folders.js';
import { v2FormRoutes } from './forms.js';
import { v2PartialRoutes } from './partials.js';
import { v2PortalRoutes } from './portals.js';
import { v2SmartListRoutes } from './smartlists.js';
import { V2_PREFIX, V2_XML_PATH } from './paths.js';
import type { EmbedHtml } from './route.js';
import { v2SubmissionRoutes } from './submissions.js';
import { v2WebhookRoutes } from './webhooks.js';
import { nestParameters, type Params } from './wire.js';

function isLoopback(ip: string): boolean {
  return ip === '::1' || ip.startsWith('127.') || ip.startsWith('::ffff:127.');
}

/**
 * Bodies as v2 clients send them: form-encoded (the default), JSON, form-encoded labelled
 * application/json (as the original's own examples do), or with no content type at all.
 */
function parseV2Body(bytes: Buffer): unknown {
  const text = decodeBody(bytes).trim();
  if (text === '') return undefined;
  if (text.startsWith('{') || text.startsWith('[')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new AppError('invalid_json');
    }
  }
  return nestParameters(parseFormBody(bytes));
}

/**
 * A GET's body, which Fastify leaves unread: v2 clients may put their parameters there. One
 * over the limit is refused, and its connection closed after the answer (as Fastify does for
 * other bodies): the rest of the body is never read, so the connection could carry no further
 * request, and left open it hung until its keep-alive timeout.
 */
async function readGetBody(req: FastifyRequest, reply: FastifyReply, limit: number): Promise<void> {
  const length = Number(req.headers['content-length'] ?? 0);
  if (req.method !== 'GET' || (length === 0 && req.headers['transfer-encoding'] === undefined)) return;
  const tooLarge = () => {
    reply.header('connection', 'close');
    return new AppError('payload_too_large');
  };
  if (length > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  req.body = parseV2Body(Buffer.concat(chunks));
}

function acceptV2Bodies(api: FastifyInstance, bodyLimit: number): void {
  api.removeAllContentTypeParsers();
  api.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, raw, done) => {
    try {
      done(null, parseV2Body(raw as Buffer));
    } catch (error) {
      done(error as Error);
    }
  });
  api.addHook('preValidation', (req, reply) => readGetBody(req, reply, bodyLimit));
  // Bodies are read by the handlers (wire.ts) and checked against the v2025 schemas there.
  api.setValidatorCompiler((route) => (route.httpPart === 'body' ? () => true : validatorCompiler(route)));
}

/**
 * `oauth_token` in the query string, as v2 clients may send it, is taken as the bearer token.
 * When PUBLIC_URL is https, only over HTTPS or from this machine: a token in a URL over
 * plain HTTP is readable on the way.
 */
function acceptOauthTokenParameter(api: FastifyInstance, ctx: AppContext): void {
  const httpsOnly = ctx.config.publicUrl.startsWith('https:');
  api.addHook('onRequest', async (req) => {
    const token = (req.query as Params | undefined)?.oauth_token;
    if (token === undefined || req.headers.authorization !== undefined) return;
    if (httpsOnly && req.protocol !== 'https' && !isLoopback(req.ip))
      throw new UnauthorizedError('token_in_query_refused');
    if (typeof token !== 'string') throw new UnauthorizedError('token_malformed');
    req.headers.authorization = `Bearer ${token}`;
  });
}

/** tokens and quota: the same as the v2025 API's (app.ts). */
export function v2Api(
  ctx: AppContext,
  tokens: BearerTokens,
  quota: ApiQuota,
  embedHtml: EmbedHtml,
): FastifyPluginAsyncTypebox {
  return async (app) => {
    // An .xml path: the original answered XML there; this service answers JSON only.
    app.route({
      method: ['GET', 'POST', 'PUT', 'DELETE'],
      url: V2_XML_PATH,
      schema: { hide: true },
      handler: () => {
        throw new AppError('not_acceptable');
      },
    });

    await app.register(
      async (api) => {
        acceptV2Bodies(api, ctx.config.bodyLimit);
        acceptOauthTokenParameter(api, ctx);
        requireBearerToken(api, tokens);
        registerRateLimits(api, quota);
        requireAccessRules(api, ctx.db);
        await api.register(v2FormRoutes(ctx, embedHtml));
        await api.register(v2FieldRoutes(ctx));
        await api.register(v2SubmissionRoutes(ctx));
        await api.register(v2FolderRoutes(ctx));
        await api.register(v2WebhookRoutes(ctx));
        await api.register(v2EmailRoutes(ctx));
        await api.register(v2PartialRoutes(ctx));
        await api.register(v2PortalRoutes(ctx));
        await api.register(v2SmartListRoutes(ctx));
      },
      { prefix: V2_PREFIX },
    );
  };
}
