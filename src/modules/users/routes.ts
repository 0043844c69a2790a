import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import {
  FormPermission,
  FormPermissionDeleted,
  FormPermissionList,
  FormPermissionSet,
  User,
  UserCreate,
  UserDeleted,
  UserList,
  UserUpdate,
} from './schemas.js';
import * as service from './service.js';

const tags = ['Users'];
const params = idParams('userId');
const permissionParams = idParams('userId', 'formId');
const config = { access: { scope: 'admin', role: 'admin' } satisfies RouteAccess };

const HASHING =
  "A password is hashed with scrypt: each hash counts against the account's budget (ACCOUNT_HASH_ATTEMPTS per 15 minutes, 429 beyond it), " +
  'and 503 hashing_busy with Retry-After answers while the service is hashing as many passwords as it can queue.';

export function userRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/users',
      {
        config,
        schema: {
          tags,
          operationId: 'listUsers',
          summary: 'List the users of the account',
          response: { 200: UserList, ...errors() },
        },
      },
      (req) => service.listUsers(ctx.db, principal(req)),
    );

    app.post(
      '/users',
      {
        config,
        schema: {
          tags,
          operationId: 'createUser',
          summary: 'Add a user to the account',
          description:
            'Members see only the forms they are given a level on (PUT /users/{userId}/permissions/{formId}); admins see and manage everything but the owner. ' +
            'An email is unique within the account (409 email_taken); users of other accounts may have the same email, as one person may belong to several accounts. ' +
            HASHING,
          body: UserCreate,
          response: { 200: Type.Ref(User), ...errors(409) },
        },
      },
      (req) => service.createUser(ctx, principal(req), req.body, ctx.hasher.kdf({ account: principal(req).accountId })),
    );

    app.get(
      '/users/:userId',
      {
        config,
        schema: {
          tags,
          operationId: 'getUser',
          summary: 'Read a user',
          params,
          response: { 200: Type.Ref(User), ...errors(404) },
        },
      },
      (req) => service.getUser(ctx.db, principal(req), { userId: req.params.userId }),
    );

    app.put(
      '/users/:userId',
      {
        config,
        schema: {
          tags,
          operationId: 'updateUser',
          summary: 'Rename a user, change their role or set their password',
          description:
            "The owner's role never changes, only the owner changes the owner's name and password (403 owner_protected), and nobody changes their own role. Making a member an admin drops their form permissions (admins hold every level). " +
            "Changing a password that was set revokes the user's personal access tokens and OAuth grants, except the token making the request when it is the user's own. " +
            HASHING,
          params,
          body: UserUpdate,
          response: { 200: Type.Ref(User), ...errors(404) },
        },
      },
      (req) =>
        service.updateUser(
          ctx,
          principal(req),
          { userId: req.params.userId },
          req.body,
          ctx.hasher.kdf({ account: principal(req).accountId }),
        ),
    );

    app.delete(
      '/users/:userId',
      {
        config,
        schema: {
          tags,
          operationId: 'deleteUser',
          summary: 'Remove a user',
          description:
            'Their access tokens, OAuth grants and form permissions are removed with them. The owner cannot be removed, nor can you remove yourself.',
          params,
          response: { 200: UserDeleted, ...errors(404) },
        },
      },
      (req) => service.deleteUser(ctx.db, principal(req), { userId: req.params.userId }),
    );

    app.get(
      '/users/:userId/permissions',
      {
        config,
        schema: {
          tags,
          operationId: 'listUserPermissions',
          summary: "A member's form permissions",
          params,
          response: { 200: FormPermissionList, ...errors(404) },
        },
      },
      (req) => service.listPermissions(ctx.db, principal(req), { userId: req.params.userId }),
    );

    app.put(
      '/users/:userId/permissions/:formId',
      {
        config,
        schema: {
          tags,
          operationId: 'setUserPermission',
          summary: 'Give a member a level on a form',
          description: 'Replaces the level the member held on the form. Only members hold form permissions.',
          params: permissionParams,
          body: FormPermissionSet,
          response: { 200: FormPermission, ...errors(404) },
        },
      },
      (req) =>
        service.setPermission(
          ctx,
          principal(req),
          { userId: req.params.userId, formId: req.params.formId },
          req.body.level,
        ),
    );

    app.delete(
      '/users/:userId/permissions/:formId',
      {
        config,
        schema: {
          tags,
          operationId: 'deleteUserPermission',
          summary: "Take a member's level on a form away",
          params: permissionParams,
          response: { 200: FormPermissionDeleted, ...errors(404) },
        },
      },
      (req) =>
        service.deletePermission(ctx.db, principal(req), { userId: req.params.userId, formId: req.params.formId }),
    );
  };
}
