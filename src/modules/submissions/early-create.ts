import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { accessByRole, type RouteAccess } from '../../http/access.js';
import type { BearerTokens } from '../../http/auth.js';
import { decodeBody, jsonBodyAllowed } from '../../http/characters.js';
import { earlyErrorAnswer, jsonAnswer, type EarlyBodyRoute } from '../../http/early-routes.js';
import type { ApiQuota } from '../../http/rate-limit.js';
import { clientAddress, metaOf, type TrustProxy } from '../../http/request-meta.js';
import { MAX_ID } from '../../http/schemas.js';
import { buildSerializer } from '../../http/serialization.js';
import { validatorCompiler } from '../../http/validation.js';
import type { SubmissionsDeps } from './definitions.js';
import { Submission, SubmissionCreate } from './schemas.js';
import { TokenUnconfirmed, type TokenCheck } from './repository.js';
import { createWithKey } from './write.js';

/** POST /forms/{formId}/submissions's access rule: the route's (routes.ts), and what the early create checks. */
export const CREATE_ACCESS: RouteAccess = { scope: 'submissions:write', level: 'submissions', formFrom: 'formId' };

/** What Fastify's JSON parser takes: application/json, with or without a charset of UTF-8. */
const JSON_TYPE = /^application\/json(?:;\s*charset=utf-8)?$/i;

export interface EarlyCreateParts {
  tokens: BearerTokens;
  quota: ApiQuota;
  trust: TrustProxy;
  /** The app's JSON parser (its prototype-poisoning rules); throws on invalid JSON. */
  parseJson: (text: string) => unknown;
  log: FastifyBaseLogger;
}

/**
 * POST {prefix}/forms/{formId}/submissions answered by EarlyRoutes, before Fastify routes it:
 * Fastify's routing, its request and reply objects and the hooks' chain were a sixth to a
 * quarter of a create's CPU in the service (docs/performance.md, "Twenty-fourth pass"). Taken
 * only when the request is plain: JSON with a length, no query string (with an
 * Idempotency-Key or without: createWithKey runs it as the route's handler does). Every step
 * the route's hooks take is taken with their own code, in an order where nothing is changed
 * until the last: the body decoded and parsed (the app's parser), its characters (the rule of
 * characters.ts) and its schema (the route's, through the same compiler), the token (looked
 * up, nothing counted; on PostgreSQL, a plain create's token as last read, which its statement
 * checks again: repository.ts, TokenCheck), the caller's access by scopes and role alone, then
 * the quota, counted in memory. Any of them that would refuse, or could not decide without
 * waiting, gives the request with its body to Fastify, whose run answers it as it would have
 * (a 401 counted as a failure, a member's level read, a 429). From the quota on, the answer is
 * this route's, the create's refusals included (earlyErrorAnswer, the error handler's mapping).
 */
export function earlyCreate(deps: SubmissionsDeps, prefix: string, parts: EarlyCreateParts): EarlyBodyRoute {
  const shape = new RegExp(`^${prefix}/forms/([1-9][0-9]{0,9})/submissions$`);
  const route = `${prefix}/forms/:formId/submissions`;
  const validate = validatorCompiler({ schema: SubmissionCreate, method: 'POST', url: route, httpPart: 'body' }) as (
    data: unknown,
  ) => boolean;
  const serialize = buildSerializer()({ schema: Submission });
  const limit = deps.ctx.config.bodyLimit;
  const { tokens, quota } = parts;

  return (req, url) => {
    const matched = shape.exec(url);
    if (!matched || req.headers['transfer-encoding'] !== undefined) return undefined;
    if (!JSON_TYPE.test(req.headers['content-type'] ?? '')) return undefined;
    const length = Number(req.headers['content-length']);
    const formId = Number(matched[1]);
    if (!(length > 0 && length <= limit) || formId > MAX_ID) return undefined;
    return { route, answer: (bytes, requestId) => create(req, url, formId, bytes, requestId) };
  };

  async function create(req: IncomingMessage, url: string, formId: number, bytes: Buffer, requestId: string) {
    let text: string;
    let body: unknown;
    try {
      text = decodeBody(bytes);
      body = parts.parseJson(text);
    } catch {
      return undefined;
    }
    if (!jsonBodyAllowed(text, body) || !validate(body)) return undefined;
    const key = req.headers['idempotency-key'];
    if (Array.isArray(key)) return undefined;
    const header = req.headers.authorization;
    const unconfirmed = key === undefined ? tokens.unconfirmedOwner(header) : undefined;
    const who = unconfirmed ?? tokens.keptOwner(header) ?? (await tokens.lookUp(header));
    if (!who || accessByRole(who, CREATE_ACCESS) !== 'allowed') return undefined;
    const limits = quota.countNow(who.tokenHash);
    if (!limits) return undefined;
    const meta = metaOf(req.headers['user-agent'], clientAddress(req, parts.trust), requestId);
    const input = body as SubmissionCreate;
    const check: TokenCheck | undefined = unconfirmed && { tokenId: unconfirmed.tokenId, role: unconfirmed.role };
    try {
      const outcome = await createWithKey(deps, who, formId, input, meta, { key, url }, check).catch(
        async (error: unknown) => {
          if (!(error instanceof TokenUnconfirmed)) throw error;
          // Nothing was written: the token is looked up, and the create made as for any token.
          // One that is not live, or no longer allowed by its role alone, goes to the route,
          // which answers as it would have (a 401, a member's level read; the quota is then
          // counted a second time, for a token whose role has just changed).
          tokens.forget(header);
          const live = await tokens.lookUp(header);
          if (!live || accessByRole(live, CREATE_ACCESS) !== 'allowed') return undefined;
          return createWithKey(deps, live, formId, input, meta, { key, url });
        },
      );
      if (!outcome) return undefined;
      if (!outcome.replayed) return jsonAnswer(route, 200, serialize(outcome.result), limits);
      const { status, body: first } = outcome.response;
      return jsonAnswer(route, status, first, [...limits, 'idempotent-replayed', 'true']);
    } catch (error) {
      const refused = earlyErrorAnswer(route, error, parts.log, requestId);
      return { ...refused, perAnswer: [...limits, ...(refused.perAnswer ?? [])] };
    } finally {
      if (check?.confirmed) tokens.confirmedUse(who);
    }
  }
}
