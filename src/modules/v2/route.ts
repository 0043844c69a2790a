/** How a v2 operation is declared (module.ts registers them; one file per resource declares them). */
import { Type, type TObject } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RouteAccess } from '../../http/access.js';
import { errors } from '../../http/schemas.js';
import type { Caller } from '../permissions/caller.js';

/** What the v2 module takes from the hosted-forms module: a form's embed HTML. */
export type EmbedHtml = (caller: Caller, formId: number) => Promise<{ html: string; url: string }>;

export const V2_TAG = 'v2 (original service)';

/** Whatever v2 parameters the request carries: documented per operation in docs/v2.md. */
const V2Query = Type.Object(
  {},
  { additionalProperties: true, description: 'v2 parameters (docs/v2.md); they may come in the body too' },
);
const V2Body = Type.Object(
  {},
  {
    additionalProperties: true,
    description:
      'v2 parameters, form-encoded (the default, with bracket notation such as field_12[first]=Ada) or JSON; ' +
      'docs/v2.md lists them per operation',
  },
);
const V2Answer = (description: string) => Type.Object({}, { additionalProperties: true, description });

type Handler = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

export interface V2Operation {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  access: RouteAccess;
  operationId: string;
  summary: string;
  params?: TObject;
  /** Takes parameters in a body (POST, PUT). */
  body?: boolean;
  /** The answer: its v2 shape, for the OpenAPI document. */
  answer: string;
  created?: boolean;
  /** Left out of the OpenAPI document (documented in docs/v2.md instead). */
  hide?: boolean;
  handler: Handler;
}

/** Declares a v2 operation: access rule, OpenAPI entry under the v2 tag, lenient parameters. */
export function v2Route(app: FastifyInstance, op: V2Operation): void {
  const ok = op.created ? 201 : 200;
  app.route({
    method: op.method,
    url: op.url,
    config: { access: op.access },
    schema: {
      tags: [V2_TAG],
      ...(op.hide ? { hide: true } : {}),
      operationId: op.operationId,
      summary: op.summary,
      ...(op.params ? { params: op.params } : {}),
      querystring: V2Query,
      ...(op.body
        ? {
            body: V2Body,
            consumes: ['application/x-www-form-urlencoded', 'application/json'],
            'x-formwork-body-optional': true,
          }
        : {}),
      response: { [ok]: V2Answer(op.answer), ...errors(400, 404) },
    },
    handler: async (req, reply) => {
      const answer = await op.handler(req, reply);
      if (op.created) reply.code(201);
      return answer;
    },
  });
}
