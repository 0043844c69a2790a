/**
 * v2 operations whose v2 form is no more than the v2025 one in v2's manner (portals, smart
 * lists): snake_case parameters read into the v2025 body or query and checked against its
 * schema, the same service called, the answer written in snake_case with string ids and
 * Eastern times, deletes as {"success": "1", "id": "<id>"}.
 */
import type { TObject, TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import type { Caller } from '../permissions/caller.js';
import { v2Route } from './route.js';
import { checked, deleted, fromV2, parametersOf, v2Writer } from './wire.js';

/** Page parameters of v2 lists, as the v2025 names. */
const PAGING = { page: 'pageNumber', page_number: 'pageNumber', per_page: 'pageSize' };

export interface Translated {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  access: RouteAccess;
  operationId: string;
  summary: string;
  params?: TObject;
  /** The v2025 body schema the parameters are read into. */
  body?: TSchema;
  /** The v2025 query schema the parameters are read into. */
  query?: TSchema;
  created?: boolean;
  /** Answers {"success": "1", "id": …} with this path parameter. */
  deletes?: string;
  /** The v2025 operation's response schema: it says which members of the answer are times. */
  reply?: TSchema;
  answer: string;
  call: (ctx: AppContext, caller: Caller, params: Record<string, number>, input: unknown) => Promise<unknown>;
}

export function v2Translated(app: FastifyInstance, ctx: AppContext, op: Translated): void {
  if (op.reply === undefined && op.deletes === undefined) throw new Error(`${op.operationId}: no response schema`);
  const write = op.reply === undefined ? undefined : v2Writer(op.reply, app.getSchemas());
  v2Route(app, {
    method: op.method,
    url: op.url,
    access: op.access,
    operationId: op.operationId,
    summary: op.summary,
    ...(op.params ? { params: op.params } : {}),
    body: op.body !== undefined,
    ...(op.created ? { created: true } : {}),
    answer: op.answer,
    handler: async (req) => {
      const params = (req.params ?? {}) as Record<string, number>;
      const given = parametersOf(req);
      let input: unknown;
      if (op.body) input = checked(op.body, fromV2(given, op.body));
      else if (op.query) input = checked(op.query, fromV2(given, op.query, PAGING), 'querystring');
      const result = await op.call(ctx, principal(req), params, input);
      if (op.deletes) return deleted(params[op.deletes]!);
      return write!(result);
    },
  });
}
