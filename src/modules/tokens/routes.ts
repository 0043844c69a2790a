import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { PersonalTokenCreate, PersonalTokenCreated, PersonalTokenList, PersonalTokenRevoked } from './schemas.js';
import * as service from './service.js';

const tags = ['Personal access tokens'];
// Making tokens is account administration, so it takes the admin scope (an application
// granted forms:read cannot mint itself a token); every role manages its own. An OAuth
// access token cannot make one even with admin (service.ts, refuseOAuthToken).
const own = { access: { scope: 'admin' } satisfies RouteAccess };
const others = { access: { scope: 'admin', role: 'admin' } satisfies RouteAccess };
const userParams = idParams('userId');
const ownTokenParams = idParams('tokenId');
const userTokenParams = idParams('userId', 'tokenId');

const CREATE_DESCRIPTION =
  'Answers with the token itself, once; only its hash is kept. The token acts as its user, within the scopes given ' +
  '(by default those of the token making the request, and never more), until it expires or is revoked. ' +
  'Only a personal access token makes one: a request with an OAuth access token gets 403 `insufficient_scope`, ' +
  'whatever its scopes, since the new token would outlive the grant and the application.';
const REVOKE_DESCRIPTION = 'The token stops working at once, on every server.';
const OWNER_NOTE =
  "The owner's tokens are the owner's alone to manage: an admin naming the owner gets 403 `owner_protected`.";

export function tokenRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/tokens',
      {
        config: own,
        schema: {
          tags,
          operationId: 'listTokens',
          summary: 'List your personal access tokens',
          description: 'Never their values. Revoked tokens are left out; expired ones are listed.',
          response: { 200: PersonalTokenList, ...errors() },
        },
      },
      (req) => service.listTokens(ctx.db, principal(req), { userId: principal(req).userId }),
    );

    app.post(
      '/tokens',
      {
        config: own,
        schema: {
          tags,
          operationId: 'createToken',
          summary: 'Make yourself a personal access token',
          description: CREATE_DESCRIPTION,
          body: PersonalTokenCreate,
          response: { 200: PersonalTokenCreated, ...errors() },
        },
      },
      (req) =>
        service.createToken(ctx.db, principal(req), { userId: principal(req).userId }, req.body, ctx.clock.now()),
    );

    app.delete(
      '/tokens/:tokenId',
      {
        config: own,
        schema: {
          tags,
          operationId: 'revokeToken',
          summary: 'Revoke one of your personal access tokens',
          description: REVOKE_DESCRIPTION,
          params: ownTokenParams,
          response: { 200: PersonalTokenRevoked, ...errors(404) },
        },
      },
      (req) =>
        service.revokeToken(
          ctx.db,
          principal(req),
          { userId: principal(req).userId, tokenId: req.params.tokenId },
          ctx.clock.now(),
        ),
    );

    app.get(
      '/users/:userId/tokens',
      {
        config: others,
        schema: {
          tags,
          operationId: 'listUserTokens',
          summary: "List a user's personal access tokens",
          description: `Never their values. ${OWNER_NOTE}`,
          params: userParams,
          response: { 200: PersonalTokenList, ...errors(404) },
        },
      },
      (req) => service.listTokens(ctx.db, principal(req), { userId: req.params.userId }),
    );

    app.post(
      '/users/:userId/tokens',
      {
        config: others,
        schema: {
          tags,
          operationId: 'createUserToken',
          summary: 'Make a personal access token for a user',
          description: `${CREATE_DESCRIPTION} ${OWNER_NOTE}`,
          params: userParams,
          body: PersonalTokenCreate,
          response: { 200: PersonalTokenCreated, ...errors(404) },
        },
      },
      (req) => service.createToken(ctx.db, principal(req), { userId: req.params.userId }, req.body, ctx.clock.now()),
    );

    app.delete(
      '/users/:userId/tokens/:tokenId',
      {
        config: others,
        schema: {
          tags,
          operationId: 'revokeUserToken',
          summary: "Revoke a user's personal access token",
          description: `${REVOKE_DESCRIPTION} ${OWNER_NOTE}`,
          params: userTokenParams,
          response: { 200: PersonalTokenRevoked, ...errors(404) },
        },
      },
      (req) =>
        service.revokeToken(
          ctx.db,
          principal(req),
          { userId: req.params.userId, tokenId: req.params.tokenId },
          ctx.clock.now(),
        ),
    );
  };
}
