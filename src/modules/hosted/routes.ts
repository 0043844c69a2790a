import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { AppError, BadRequestError, TooManyRequestsError } from '../../errors.js';
import type { EarlyAnswer } from '../../http/early-routes.js';
import { throttle } from '../../http/rate-limit.js';
import type { FormSettings } from '../forms/schemas.js';
import { sendImage } from '../images/serve.js';
import { resumeHash } from '../partials/sealing.js';
import { sessionCookie } from '../portals/session.js';
import { optionImageOfForm } from '../smartlists/repository.js';
import { EMAIL } from '../submissions/values.js';
import { issueUploadUrls } from '../uploads/service.js';
import { clientBundle } from './bundle.js';
import { collectFields, type FieldInput } from './form-model.js';
import { pageHeaders } from './headers.js';
import { closedPage, confirmationPage, DEFAULT_SUCCESS, formPage } from './page.js';
import { renderForm } from './render.js';
import { requestMetaOf } from '../../http/request-meta.js';
import * as service from './service.js';
import { assetUrls, CSS_HASH } from './assets.js';
import { FORM_CSS } from './styles.js';
import { acceptFormPosts } from '../../http/characters.js';

const ViewKeyParams = Type.Object({ viewKey: Type.String({ maxLength: 64 }) }, { additionalProperties: false });

/** The page of an open form that this process has read and may still trust, else undefined. */
function openKeptPage(deps: service.HostedDeps, viewKey: string): service.PageDefinition | undefined {
  const kept = service.keptPageForm(deps, viewKey, service.PAGE_FRESHNESS_MS);
  return kept && service.stateOf(kept.form, kept.settings) === 'open' ? kept : undefined;
}

/**
 * GET /f/{viewKey} with nothing in its URL, for EarlyRoutes (src/http/early-routes.ts): the
 * page when openKeptPage has it, counted as a view like the route's own answer.
 */
export function earlyPage(deps: service.HostedDeps, url: string): EarlyAnswer | undefined {
  if (url.includes('?')) return undefined;
  const viewKey = url.slice('/f/'.length);
  if (viewKey.length === 0 || viewKey.length > 64 || viewKey.includes('/')) return undefined;
  const def = openKeptPage(deps, viewKey);
  if (!def) return undefined;
  return { route: '/f/:viewKey', headers: def.headers, body: countedPlainPage(deps, def) };
}

/** The page of a view with nothing in its URL, counted as a view: what the route and EarlyRoutes answer. */
function countedPlainPage(deps: service.HostedDeps, def: service.PageDefinition): Buffer {
  deps.counters.add(def.form.account_id, def.form.id, 'views');
  return service.plainDocument(deps, def);
}

interface PostedPage {
  fields: FieldInput[];
  loadToken: string;
  honeypot: string;
  resumeToken?: string;
  /** A plain HTML post (no script): answered with pages rather than JSON. */
  plain: boolean;
}

/**
 * An embedded form posts from another site's page: the answers to its requests may be read
 * there (no cookies are involved). Only on the routes the script calls.
 */
function anyOrigin(_req: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, p: unknown) => void) {
  reply.header('access-control-allow-origin', '*');
  done(null, payload);
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** The fields of a JSON post from the page's script: the shape POST /submissions takes. */
function jsonFields(raw: unknown): FieldInput[] {
  if (!Array.isArray(raw) || raw.length > 1000)
    throw new BadRequestError('invalid_request', 'fields must be a list', {
      details: [{ property: 'body.fields', message: 'must be a list of at most 1000 fields' }],
    });
  return raw.map((f, i) => {
    const obj = typeof f === 'object' && f !== null ? (f as Record<string, unknown>) : {};
    const id = Number(obj.id);
    if (!Number.isInteger(id) || id < 1)
      throw new BadRequestError('invalid_request', `fields[${i}].id must be a field id`, {
        details: [{ property: `body.fields[${i}].id`, message: 'must be a field id' }],
      });
    return { id, value: obj.value };
  });
}

/** At most this many resume links of one partial by email per hour, and to one address per day. */
export const RESUME_EMAILS_PER_PARTIAL_PER_HOUR = 3;
export const RESUME_EMAILS_PER_ADDRESS_PER_DAY = 5;

/** The address a JSON partial save asks the resume link to be emailed to, checked; undefined when none. */
function resumeEmailOf(body: unknown, plain: boolean): string | undefined {
  if (plain || typeof body !== 'object' || body === null) return undefined;
  const raw = (body as Record<string, unknown>).resumeEmail;
  if (raw === undefined || raw === null || raw === '') return undefined;
  const address = typeof raw === 'string' ? raw.trim() : '';
  if (address.length > 254 || !EMAIL.test(address))
    throw new BadRequestError('validation_failed', 'resumeEmail: must be an email address', {
      details: [{ property: 'body.resumeEmail', message: 'must be an email address' }],
    });
  return address;
}

function postedPage(def: service.PageDefinition, body: unknown): PostedPage {
  if (body instanceof URLSearchParams) {
    return {
      fields: collectFields(def.fields, (name) => body.getAll(name)),
      loadToken: body.get('_fw') ?? '',
      honeypot: body.get('website') ?? '',
      resumeToken: body.get('_resume') || undefined,
      plain: true,
    };
  }
  const obj = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  return {
    fields: jsonFields(obj.fields ?? []),
    loadToken: str(obj._fw),
    honeypot: str(obj.website),
    resumeToken: str(obj._resume) || undefined,
    plain: false,
  };
}

/**
 * The public side of hosted forms, outside the token API: the page at each form's URL, its
 * submit (a plain HTML post, or JSON from the page's script), upload URLs for its file and
 * signature fields, partial saves, the start beacon, and the page's script and styles.
 */
export function hostedPageRoutes(ctx: AppContext, deps: service.HostedDeps): FastifyPluginAsyncTypebox {
  const limits = ctx.config.hosted;
  return async (app) => {
    // A plain HTML form posts urlencoded.
    acceptFormPosts(app);

    /** A page without the form (closed, confirmed, too long to send): it posts nowhere and shows no logo. */
    async function page(reply: FastifyReply, status: number, html: string) {
      return reply.code(status).headers(pageHeaders(ctx.config)).send(html);
    }

    /**
     * The page of a form around its HTML (with values, errors or a token of its own), under the
     * headers of its plain page: a post from a prefilled, resumed or refused page is redirected
     * too, and browsers check that redirect against the policy's form-action.
     */
    async function formView(reply: FastifyReply, status: number, def: service.PageDefinition, html: string) {
      return reply
        .code(status)
        .headers(def.headers)
        .send(
          formPage({
            name: def.name,
            description: def.settings.description,
            lang: def.settings.language,
            assets: await assetUrls(),
            theme: service.themeAssets(def.viewKey, def.theme),
            form: html,
          }),
        );
    }

    async function closed(
      reply: FastifyReply,
      def: service.PageDefinition | undefined,
      state: service.FormState | 'unknown',
    ) {
      const settings: FormSettings = def ? def.settings : {};
      const assets = await assetUrls();
      const closedMessage = settings.closedMessage ?? 'This form is not taking answers at the moment.';
      const [status, heading, message] =
        state === 'unknown'
          ? [404, 'Form not found', 'There is no form at this address. Check the link you were given.']
          : state === 'deleted'
            ? [410, 'This form is no longer available', 'The owner of this form has removed it.']
            : state === 'full'
              ? [
                  403,
                  'This form is closed',
                  settings.closedMessage ?? 'This form has received all the answers it can take.',
                ]
              : [403, 'This form is closed', closedMessage];
      return page(
        reply,
        status,
        closedPage({
          title: def ? def.name : heading,
          heading: def && state !== 'deleted' ? def.name : heading,
          message: state === 'unknown' || state === 'deleted' ? message : `${heading}. ${message}`,
          lang: settings.language,
          assets,
        }),
      );
    }

    /** The form page again, with the values as sent and the problems next to their fields. */
    async function again(
      reply: FastifyReply,
      def: service.PageDefinition,
      status: number,
      state: { errors: Map<number, string>; values: Map<number, unknown>; formError?: string; resumeToken?: string },
    ) {
      const html = renderForm(def, {
        values: state.values,
        errors: state.errors,
        formError: state.formError,
        resumeToken: state.resumeToken,
        loadToken: service.newLoadToken(deps, def),
        base: '',
      });
      return formView(reply, status, def, html);
    }

    /** PUBLIC_SUBMIT_PER_MINUTE per client address, shared by every process through Redis when REDIS_URL is set. */
    async function limit(req: FastifyRequest, def: service.PageDefinition, what: string, times = 1) {
      try {
        await throttle(ctx.rateLimiter, `public-${what}:${req.ip}`, limits.publicSubmitPerMinute * times, 60);
      } catch (error) {
        if (error instanceof TooManyRequestsError)
          deps.counters.add(def.form.account_id, def.form.id, 'refused_rate_limit');
        throw error;
      }
    }

    /**
     * Resume links by email are limited per partial and per address (on top of the per-client
     * limit of partial saves), so that the page cannot be used to send mail to anyone at will.
     * Counted before the save, so a refused request changes nothing.
     */
    async function limitResumeEmails(
      req: FastifyRequest,
      def: service.PageDefinition,
      address: string,
      resumeToken: string | undefined,
    ) {
      try {
        // A new partial has no token yet: its first email cannot be over its limit.
        if (resumeToken !== undefined)
          await throttle(
            ctx.rateLimiter,
            `resume-email-partial:${def.form.id}:${resumeHash(resumeToken)}`,
            RESUME_EMAILS_PER_PARTIAL_PER_HOUR,
            3600,
          );
        // The address is hashed: the limiter's keys (Redis) hold no addresses.
        await throttle(
          ctx.rateLimiter,
          `resume-email-to:${createHash('sha256').update(address.toLowerCase()).digest('base64url')}`,
          RESUME_EMAILS_PER_ADDRESS_PER_DAY,
          86_400,
        );
      } catch (error) {
        if (error instanceof TooManyRequestsError)
          deps.counters.add(def.form.account_id, def.form.id, 'refused_rate_limit');
        throw error;
      }
    }

    // Bodies over BODY_LIMIT on these routes are counted as refusals of their form.
    app.setErrorHandler(async (error, req, reply) => {
      const code = (error as { code?: string }).code;
      const viewKey = (req.params as { viewKey?: string } | undefined)?.viewKey;
      if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' && viewKey) {
        const def = await service.pageForm(deps, viewKey).catch(() => undefined);
        if (def) deps.counters.add(def.form.account_id, def.form.id, 'refused_too_large');
        // A plain HTML post gets a page that says so; the script gets the JSON error.
        if (def && /^application\/x-www-form-urlencoded/.test(req.headers['content-type'] ?? ''))
          return page(
            reply.header('connection', 'close'),
            413,
            closedPage({
              title: def.name,
              heading: def.name,
              message:
                'Your answers were too long to send. Please shorten the longest ones and send the form again from its page.',
              lang: def.settings.language,
              assets: await assetUrls(),
            }),
          );
      }
      throw error;
    });

    app.get(
      '/assets/:file',
      { schema: { hide: true, params: Type.Object({ file: Type.String({ maxLength: 100 }) }) } },
      async (req, reply) => {
        const js = await clientBundle();
        const immutable = {
          'cache-control': 'public, max-age=31536000, immutable',
          'access-control-allow-origin': '*',
        };
        if (req.params.file === `form-${CSS_HASH}.css`)
          return reply.headers({ ...immutable, 'content-type': 'text/css; charset=utf-8' }).send(FORM_CSS);
        if (req.params.file === `form-${js.hash}.js`)
          return reply.headers({ ...immutable, 'content-type': 'text/javascript; charset=utf-8' }).send(js.code);
        return reply.code(404).type('text/plain; charset=utf-8').send('Not found');
      },
    );

    // The form's theme (hosted/theme.ts): cached for good under the hash the page names, fresh otherwise.
    app.get(
      '/f/:viewKey/theme.css',
      {
        schema: {
          hide: true,
          params: ViewKeyParams,
          querystring: Type.Object({ v: Type.Optional(Type.String({ maxLength: 64 })) }),
        },
      },
      async (req, reply) => {
        const def = await service.pageForm(deps, req.params.viewKey, service.PAGE_FRESHNESS_MS);
        if (!def || def.form.deleted_at !== null)
          return reply.code(404).type('text/plain; charset=utf-8').send('Not found');
        const current = req.query.v === def.theme.hash;
        return reply
          .headers({
            'content-type': 'text/css; charset=utf-8',
            'cache-control': current ? 'public, max-age=31536000, immutable' : 'no-cache',
            'access-control-allow-origin': '*',
          })
          .send(def.theme.sheet);
      },
    );

    /** A view of an open form's page with nothing in its URL: what most views are. */
    function plainView(def: service.PageDefinition, reply: FastifyReply) {
      return reply.code(200).headers(def.headers).send(countedPlainPage(deps, def));
    }

    async function view(viewKey: string, query: { prefill?: string; resume?: string }, reply: FastifyReply) {
      const def = await service.pageForm(deps, viewKey, service.PAGE_FRESHNESS_MS);
      if (!def) return closed(reply, undefined, 'unknown');
      const state = service.stateOf(def.form, def.settings);
      if (state !== 'open') return closed(reply, def, state);
      if (!query.prefill && !query.resume) return plainView(def, reply);
      deps.counters.add(def.form.account_id, def.form.id, 'views');
      const form = await service.formHtml(deps, def, query);
      return formView(reply, 200, def, form);
    }

    app.get(
      '/f/:viewKey',
      // Read by hand rather than through a schema: this is the route that people load most.
      { schema: { hide: true } },
      (request, reply) => {
        const req = request as FastifyRequest<{ Params: { viewKey: string }; Querystring: Record<string, unknown> }>;
        const query = { prefill: str(req.query.prefill) || undefined, resume: str(req.query.resume) || undefined };
        if (req.params.viewKey.length > 64) return closed(reply, undefined, 'unknown');
        // Most views (when EarlyRoutes does not answer them first): a form this process has
        // read (and may trust), open, with nothing in the URL. Answered without an await,
        // which saves the promise turns of an async handler.
        const kept = !query.prefill && !query.resume ? openKeptPage(deps, req.params.viewKey) : undefined;
        if (kept) {
          void plainView(kept, reply);
          return;
        }
        return view(req.params.viewKey, query, reply);
      },
    );

    app.post(
      '/f/:viewKey',
      { schema: { hide: true, params: ViewKeyParams }, onSend: anyOrigin },
      async (req, reply) => {
        const def = await service.pageForm(deps, req.params.viewKey);
        if (!def) {
          if (req.body instanceof URLSearchParams) return closed(reply, undefined, 'unknown');
          throw new AppError('form_not_found');
        }
        const posted = postedPage(def, req.body);
        const refuse = async (error: AppError) => {
          if (!posted.plain) throw error;
          return again(reply, def, error.statusCode, {
            errors: new Map(),
            values: service.shownValues(def, posted.fields),
            formError: error.message,
            resumeToken: posted.resumeToken,
          });
        };
        try {
          await limit(req, def, 'submit');
          service.screen(deps, def, posted);
        } catch (error) {
          if (error instanceof AppError) {
            if (error instanceof TooManyRequestsError) reply.header('retry-after', String(error.retryAfterSeconds));
            return refuse(error);
          }
          throw error;
        }
        const outcome = await service.submitPage(
          deps,
          def,
          { ...posted, portalSession: sessionCookie(req.headers.cookie) },
          requestMetaOf(req),
        );
        if (outcome.kind === 'closed') {
          if (posted.plain) return closed(reply, def, outcome.state);
          // A removed form is not found, as for the page's other JSON routes and the API.
          if (outcome.state === 'deleted') throw new AppError('form_not_found');
          throw new AppError(outcome.state === 'full' ? 'form_full' : 'form_inactive', def.settings.closedMessage);
        }
        if (outcome.kind === 'invalid') {
          if (posted.plain) return again(reply, def, 400, { ...outcome, resumeToken: posted.resumeToken });
          return reply.code(400).send({
            status: 'error',
            error: outcome.formError ?? 'Some answers need your attention.',
            code: 'invalid_submission',
            fieldErrors: Object.fromEntries(outcome.errors),
          });
        }
        if (!posted.plain) return { status: 'ok', message: outcome.message, redirectUrl: outcome.redirectUrl };
        if (outcome.redirectUrl)
          return reply.code(303).header('location', outcome.redirectUrl).header('cache-control', 'no-store').send();
        return page(
          reply,
          200,
          confirmationPage({
            name: def.name,
            message: outcome.message || DEFAULT_SUCCESS,
            lang: def.settings.language,
            assets: await assetUrls(),
          }),
        );
      },
    );

    // The image of an option of a smart list that a select, radio or checkbox field of the form uses.
    app.get(
      '/f/:viewKey/options/:optionId/image',
      {
        schema: {
          hide: true,
          params: Type.Object(
            { viewKey: Type.String({ maxLength: 64 }), optionId: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) },
            { additionalProperties: false },
          ),
          querystring: Type.Object({ v: Type.Optional(Type.String({ maxLength: 40 })) }),
        },
      },
      async (req, reply) => {
        const def = await service.pageForm(deps, req.params.viewKey, service.PAGE_FRESHNESS_MS);
        const image =
          def && def.form.deleted_at === null
            ? await optionImageOfForm(ctx.db, def.form.account_id, def.form.id, req.params.optionId)
            : undefined;
        if (!image)
          return reply
            .code(404)
            .type('text/plain; charset=utf-8')
            .header('cache-control', 'no-store')
            .send('Not found');
        return sendImage(ctx, reply, image.key, image.type, req.query.v);
      },
    );

    app.post(
      '/f/:viewKey/uploads',
      {
        onSend: anyOrigin,
        schema: {
          hide: true,
          params: ViewKeyParams,
          body: Type.Object(
            {
              fieldId: Type.Integer({ minimum: 1 }),
              filenames: Type.Array(Type.String({ maxLength: 255 }), { minItems: 1, maxItems: 20 }),
            },
            { additionalProperties: false },
          ),
        },
      },
      async (req) => {
        const def = await openForm(req.params.viewKey);
        // Several files per submission, and a signature redrawn: more room than submits.
        await limit(req, def, 'upload', 10);
        const urls = await issueUploadUrls(
          ctx,
          { accountId: def.form.account_id },
          { formId: def.form.id, fieldId: req.body.fieldId },
          req.body.filenames,
        );
        // The service's own upload URLs are given relative to it, so that the page works under any address it is reached at.
        return {
          uploads: urls.uploads.map((u) => ({
            ...u,
            uploadUrl: u.uploadUrl.startsWith(`${ctx.config.publicUrl}/`)
              ? u.uploadUrl.slice(ctx.config.publicUrl.length)
              : u.uploadUrl,
          })),
        };
      },
    );

    async function openForm(viewKey: string): Promise<service.PageDefinition> {
      const def = await service.pageForm(deps, viewKey);
      if (!def || def.form.deleted_at !== null) throw new AppError('form_not_found');
      const state = service.stateOf(def.form);
      if (state === 'inactive') throw new AppError('form_inactive', def.settings.closedMessage);
      if (state === 'full') throw new AppError('form_full', def.settings.closedMessage);
      return def;
    }

    app.post(
      '/f/:viewKey/partial',
      { schema: { hide: true, params: ViewKeyParams }, onSend: anyOrigin },
      async (req) => {
        const def = await openForm(req.params.viewKey);
        if (!def.saveAndResume) throw new AppError('save_and_resume_off');
        const posted = postedPage(def, req.body);
        if (posted.honeypot !== '') {
          deps.counters.add(def.form.account_id, def.form.id, 'refused_honeypot');
          throw new BadRequestError('submission_refused');
        }
        await limit(req, def, 'partial');
        const resumeEmail = resumeEmailOf(req.body, posted.plain);
        if (resumeEmail !== undefined) await limitResumeEmails(req, def, resumeEmail, posted.resumeToken);
        return service.savePagePartial(deps, def, { ...posted, resumeEmail }, requestMetaOf(req));
      },
    );

    // The script of embedded HTML gets its page token here when it starts (the HTML itself is kept by other sites).
    app.get('/f/:viewKey/token', { schema: { hide: true, params: ViewKeyParams }, onSend: anyOrigin }, async (req) => {
      const def = await openForm(req.params.viewKey);
      deps.counters.add(def.form.account_id, def.form.id, 'views');
      return { loadToken: service.newLoadToken(deps, def) };
    });

    app.post(
      '/f/:viewKey/events',
      {
        onSend: anyOrigin,
        schema: {
          hide: true,
          params: ViewKeyParams,
          body: Type.Object({ type: Type.Literal('start') }, { additionalProperties: false }),
        },
      },
      async (req) => {
        const def = await service.pageForm(deps, req.params.viewKey);
        if (def && service.stateOf(def.form) === 'open') deps.counters.add(def.form.account_id, def.form.id, 'starts');
        return { status: 'ok' };
      },
    );

    app.options('/f/*', { schema: { hide: true } }, async (_req, reply) =>
      reply
        .code(204)
        .headers({
          'access-control-allow-origin': '*',
          'access-control-allow-methods': 'POST',
          'access-control-allow-headers': 'content-type',
          'access-control-max-age': '86400',
        })
        .send(),
    );
  };
}
