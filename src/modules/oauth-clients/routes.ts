import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import {
  OAuthClient,
  OAuthClientCreate,
  OAuthClientCreated,
  OAuthClientDeleted,
  OAuthClientList,
  OAuthClientUpdate,
} from './schemas.js';
import * as service from './service.js';

const tags = ['OAuth clients'];
const params = idParams('clientId');
const config = { access: { scope: 'admin', role: 'admin' } satisfies RouteAccess };

export function oauthClientRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/oauth-clients',
      {
        config,
        schema: {
          tags,
          operationId: 'listOAuthClients',
          summary: 'List the applications registered by the account',
          response: { 200: OAuthClientList, ...errors() },
        },
      },
      (req) => service.listClients(ctx.db, principal(req)),
    );

    app.post(
      '/oauth-clients',
      {
        config,
        schema: {
          tags,
          operationId: 'createOAuthClient',
          summary: 'Register an application',
          description:
            'Answers with the client secret, once. Applications use the authorization code flow with it and PKCE (S256), ' +
            'which every authorization request of the application must carry unless requirePkce is false.',
          body: OAuthClientCreate,
          response: { 200: OAuthClientCreated, ...errors() },
        },
      },
      (req) => service.createClient(ctx, principal(req), req.body),
    );

    app.get(
      '/oauth-clients/:clientId',
      {
        config,
        schema: {
          tags,
          operationId: 'getOAuthClient',
          summary: 'Read an application',
          params,
          response: { 200: Type.Ref(OAuthClient), ...errors(404) },
        },
      },
      (req) => service.getClient(ctx.db, principal(req), { clientId: req.params.clientId }),
    );

    app.put(
      '/oauth-clients/:clientId',
      {
        config,
        schema: {
          tags,
          operationId: 'updateOAuthClient',
          summary: 'Rename an application, change its redirect URIs or whether it must use PKCE',
          description:
            'Codes already issued keep the redirect URI they were issued for; a code issued without PKCE is refused once the application requires PKCE.',
          params,
          body: OAuthClientUpdate,
          response: { 200: Type.Ref(OAuthClient), ...errors(404) },
        },
      },
      (req) => service.updateClient(ctx.db, principal(req), { clientId: req.params.clientId }, req.body),
    );

    app.delete(
      '/oauth-clients/:clientId',
      {
        config,
        schema: {
          tags,
          operationId: 'deleteOAuthClient',
          summary: 'Delete an application',
          description: 'Every token issued to it stops working at once.',
          params,
          response: { 200: OAuthClientDeleted, ...errors(404) },
        },
      },
      (req) => service.deleteClient(ctx.db, principal(req), { clientId: req.params.clientId }),
    );
  };
}
