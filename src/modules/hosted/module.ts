import type { IncomingMessage } from 'node:http';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { partialRoutes } from '../partials/routes.js';
import { submissionsDeps } from '../submissions/definitions.js';
import { embedHtml, hostedApiRoutes } from './api-routes.js';
import type { Caller } from '../permissions/caller.js';
import { PageCounters } from './counters.js';
import { earlyPage, hostedPageRoutes } from './routes.js';
import { hostedDeps } from './service.js';

/**
 * Hosted forms in one piece for app.ts: the public pages (outside the token API), their
 * API routes (inside it) and the page counters that both use.
 */
export function hostedForms(ctx: AppContext, onError: (error: unknown) => void) {
  const counters = new PageCounters(ctx, ctx.config.hosted.statsFlushSeconds * 1000, onError);
  const deps = hostedDeps(ctx, submissionsDeps(ctx), counters);
  const api: FastifyPluginAsyncTypebox = async (app) => {
    await app.register(hostedApiRoutes(ctx, deps));
    await app.register(partialRoutes(ctx));
  };
  return {
    pages: hostedPageRoutes(ctx, deps),
    /** The page of GET /f/{viewKey}, for EarlyRoutes. */
    earlyPage: (_req: IncomingMessage, url: string) => earlyPage(deps, url),
    api,
    /** The embed HTML of a form, for the v2 /form/{id}/html. */
    html: (caller: Caller, formId: number) => embedHtml(ctx, deps, caller, formId),
    close: () => counters.close(),
  };
}
