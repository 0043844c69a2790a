import type { AppContext } from '../../context.js';
import { accessByRole, type RouteAccess } from '../../http/access.js';
import type { BearerTokens } from '../../http/auth.js';
import type { EarlyRoute } from '../../http/early-routes.js';
import type { ApiQuota } from '../../http/rate-limit.js';
import { MAX_ID } from '../../http/schemas.js';
import { keptFormJson, type FormReadCaches } from './service.js';

/** GET /forms/{formId}'s access rule: the route's (routes.ts), and what the early answer checks. */
export const FORM_READ_ACCESS: RouteAccess = { scope: 'forms:read', level: 'view', formFrom: 'formId' };

/** The headers of every form read's 200, as the route sets them (routes.ts). */
export const FORM_READ_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'private, no-cache',
} as const;

/**
 * GET {prefix}/forms/{formId}, withFields=true or false or left out, answered by EarlyRoutes
 * when everything the route would do is already in this process: a token that BearerTokens
 * holds for the database's current epoch, a caller that its scopes and role alone let read
 * the form (the owner or an admin; a member's level is a database read), the answer that the
 * route made and nothing written since (keptFormJson), and a quota counted in memory. The
 * call is counted against the quota last, so that nothing is changed when it falls through.
 * Everything else goes to the route: another query, an If-None-Match (304), a member, a miss,
 * PostgreSQL (no epoch), Redis counters, a refusal of any kind.
 */
export function earlyFormRead(
  ctx: AppContext,
  prefix: string,
  deps: { caches: FormReadCaches; tokens: BearerTokens; quota: ApiQuota },
): EarlyRoute {
  const shape = new RegExp(`^${prefix}/forms/([1-9][0-9]{0,9})(?:\\?withFields=(true|false))?$`);
  const route = `${prefix}/forms/:formId`;
  return (req, url) => {
    const matched = shape.exec(url);
    if (!matched || req.headers['if-none-match'] !== undefined) return undefined;
    const formId = Number(matched[1]);
    if (formId > MAX_ID) return undefined;
    const who = deps.tokens.keptOwner(req.headers.authorization);
    if (!who || accessByRole(who, FORM_READ_ACCESS) !== 'allowed') return undefined;
    const kept = keptFormJson(ctx, deps.caches, who.accountId, formId, matched[2] === 'true');
    if (!kept) return undefined;
    const limits = deps.quota.countNow(who.tokenHash);
    if (!limits) return undefined;
    return { route, headers: FORM_READ_HEADERS, perAnswer: ['etag', kept.etag, ...limits], body: kept.body };
  };
}
