import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { imageBodyValidator, readImage, withMultipart } from '../images/route.js';
import {
  AvatarDeleted,
  AvatarUpload,
  PortalDeleted,
  PortalDetails,
  PortalForm,
  PortalFormCreate,
  PortalFormDeleted,
  PortalFormUpdate,
  PortalList,
  PortalCreate,
  PortalQuery,
  PortalUpdate,
  PortalUser,
  PortalUserCreate,
  PortalUserDeleted,
  PortalUserUpdate,
} from './schemas.js';
import * as service from './service.js';

const tags = ['Portals'];
const portalParams = idParams('portalId');
const formParams = idParams('portalId', 'formId');
const userParams = idParams('portalId', 'userId');
// Members read the account's portals; owners and admins manage them.
const read: RouteAccess = { scope: 'forms:read' };
const write: RouteAccess = { scope: 'forms:write', role: 'admin' };
const more = 'Portals: docs/portals.md.';

export function portalRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/portal',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'listPortals',
          summary: 'List portals',
          description: `The account's portals, oldest first. ${more}`,
          querystring: PortalQuery,
          response: { 200: PortalList, ...errors(403) },
        },
      },
      (req) => service.listPortals(ctx, principal(req), req.query),
    );

    app.post(
      '/portal',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'createPortal',
          summary: 'Create a portal',
          description:
            'Not in the original API, which lists no way to create a portal: added in the style of POST /smartlists. ' +
            'A portal groups forms of the account for a set of people (its users), who sign in to its page ' +
            `(the record's url) through a link sent by email. ${more}`,
          body: PortalCreate,
          response: { 201: Type.Ref(PortalDetails), ...errors(403) },
        },
      },
      async (req, reply) => reply.code(201).send(await service.createPortal(ctx, principal(req), req.body)),
    );

    app.get(
      '/portal/:portalId',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'getPortal',
          summary: 'Read a portal with its forms and users',
          params: portalParams,
          response: { 200: Type.Ref(PortalDetails), ...errors(403, 404) },
        },
      },
      (req) => service.getPortal(ctx, principal(req), req.params),
    );

    app.put(
      '/portal/:portalId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'updatePortal',
          summary: 'Rename a portal or change its description',
          params: portalParams,
          body: PortalUpdate,
          response: { 200: Type.Ref(PortalDetails), ...errors(403, 404) },
        },
      },
      (req) => service.updatePortal(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/portal/:portalId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deletePortal',
          summary: 'Delete a portal for good',
          description:
            'Permanent: the portal, its list of forms, its users with their sign-in links and sessions, and its ' +
            'avatar go. The forms and their submissions stay.',
          params: portalParams,
          response: { 200: PortalDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.deletePortal(ctx, principal(req), req.params),
    );

    await withMultipart(app, (scope) => {
      scope.withTypeProvider<TypeBoxTypeProvider>().post(
        '/portal/:portalId/avatar',
        {
          config: { access: write, streamedBody: true },
          validatorCompiler: imageBodyValidator,
          schema: {
            tags,
            operationId: 'setPortalAvatar',
            summary: 'Set or remove the avatar of a portal',
            description:
              'multipart/form-data with one part named image: a PNG, JPEG, GIF or WebP file, told by its bytes ' +
              `(not its name or declared type), of at most OPTION_IMAGE_MAX_BYTES (${ctx.config.optionImageMaxBytes} here), ` +
              'as option images take. An empty file part, a part whose value is empty or null, no part, or no body at ' +
              'all removes the avatar. A body must end with its closing boundary (--boundary--): one cut short or sent under ' +
              'another boundary is refused. Anything else is 400 invalid_image. A new avatar replaces the old one, whose ' +
              'file is removed once the change commits.',
            consumes: ['multipart/form-data'],
            'x-formwork-body-optional': true,
            params: portalParams,
            body: AvatarUpload,
            response: { 200: Type.Ref(PortalDetails), ...errors(403, 404) },
          },
        },
        (req) => service.setAvatar(ctx, principal(req), req.params, () => readImage(ctx, req)),
      );
    });

    app.delete(
      '/portal/:portalId/avatar',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deletePortalAvatar',
          summary: 'Remove the avatar of a portal',
          description: 'Answers 200 when the portal has no avatar too.',
          params: portalParams,
          response: { 200: AvatarDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.removeAvatar(ctx, principal(req), req.params),
    );

    app.post(
      '/portal/:portalId/copy',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'copyPortal',
          summary: 'Copy a portal',
          description:
            'The copy has the name with " (copy)", the description, a copy of the avatar and the same forms with ' +
            'their due dates and flags, and a page of its own; users are not copied.',
          params: portalParams,
          response: { 200: Type.Ref(PortalDetails), ...errors(403, 404) },
        },
      },
      (req) => service.copyPortal(ctx, principal(req), req.params),
    );

    app.post(
      '/portal/:portalId/form',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'addPortalForm',
          summary: 'Add a form to a portal',
          description:
            'A form of another account, a deleted form or none is 404 form_not_found; a form already in the portal ' +
            'is 400 invalid_portal_form.',
          params: portalParams,
          body: PortalFormCreate,
          response: { 200: Type.Ref(PortalForm), ...errors(403, 404) },
        },
      },
      (req) => service.addForm(ctx, principal(req), req.params, req.body),
    );

    app.put(
      '/portal/:portalId/form/:formId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'updatePortalForm',
          summary: "Change a portal form's due date or required flag",
          params: formParams,
          body: PortalFormUpdate,
          response: { 200: Type.Ref(PortalForm), ...errors(403, 404) },
        },
      },
      (req) => service.updateForm(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/portal/:portalId/form/:formId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deletePortalForm',
          summary: 'Take a form out of a portal',
          description: 'The form and its submissions stay.',
          params: formParams,
          response: { 200: PortalFormDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.removeForm(ctx, principal(req), req.params),
    );

    app.post(
      '/portal/:portalId/user',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'addPortalUser',
          summary: 'Add a user to a portal',
          description:
            'A person who may sign in to the portal page, by email (unique in the portal without regard to case: ' +
            'another is 400 invalid_portal_user). No email is sent: the user asks for a sign-in link on the page.',
          params: portalParams,
          body: PortalUserCreate,
          response: { 200: Type.Ref(PortalDetails), ...errors(403, 404) },
        },
      },
      (req) => service.addUser(ctx, principal(req), req.params, req.body),
    );

    app.put(
      '/portal/:portalId/user/:userId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'updatePortalUser',
          summary: "Change a portal user's email or name",
          description: "userId is the portal user's id. A new email ends the user's sign-in links and sessions.",
          params: userParams,
          body: PortalUserUpdate,
          response: { 200: Type.Ref(PortalUser), ...errors(403, 404) },
        },
      },
      (req) => service.updateUser(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/portal/:portalId/user/:userId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deletePortalUser',
          summary: 'Remove a user from a portal',
          description:
            "userId is the portal user's id. Their sign-in links and sessions end; submissions they made stay.",
          params: userParams,
          response: { 200: PortalUserDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.removeUser(ctx, principal(req), req.params),
    );
  };
}
