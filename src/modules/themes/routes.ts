import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import { memberOf } from '../permissions/caller.js';
import { errors } from '../../http/schemas.js';
import { Theme, ThemeCreate, ThemeDeleted, ThemeList, ThemeQuery, ThemeUpdate, themeParams } from './schemas.js';
import * as service from './service.js';

const tags = ['Themes'];
// Members read the account's themes (to use them on forms they may edit); owners and admins manage them.
const read: RouteAccess = { scope: 'forms:read' };
const write: RouteAccess = { scope: 'forms:write', role: 'admin' };
const more = 'Themes: docs/themes.md.';
const notInSpec =
  'The specification lists theme routes only under /subaccount; this route of the account itself is ours, in the same style.';

export function themeRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/themes',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'listThemes',
          summary: "List the account's themes",
          description: `The default theme first, then the others oldest first; pageNumber starts at 1. ${notInSpec} ${more}`,
          querystring: ThemeQuery,
          response: { 200: ThemeList, ...errors(403) },
        },
      },
      (req) => service.listThemes(ctx, principal(req), req.query, memberOf(principal(req))),
    );

    app.post(
      '/themes',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'createTheme',
          summary: 'Create a theme',
          description:
            'The look of hosted forms: colours, a font stack, spacing, a logo and custom CSS (checked: 400 invalid_css ' +
            'names what it may not hold). A form takes a theme through its themeId. The specification lists no way to create a theme; this is ours. ' +
            more,
          body: ThemeCreate,
          response: { 201: Type.Ref(Theme), ...errors(403) },
        },
      },
      async (req, reply) => reply.code(201).send(await service.createTheme(ctx, principal(req), req.body)),
    );

    app.get(
      '/themes/:themeId',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'getTheme',
          summary: 'Read a theme',
          description: notInSpec,
          params: themeParams,
          response: { 200: Type.Ref(Theme), ...errors(403, 404) },
        },
      },
      (req) => service.getTheme(ctx, principal(req), req.params, memberOf(principal(req))),
    );

    app.put(
      '/themes/:themeId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'updateTheme',
          summary: 'Change a theme',
          description: `The hosted pages of the forms that use it show the change at once. ${notInSpec}`,
          params: themeParams,
          body: ThemeUpdate,
          response: { 200: Type.Ref(Theme), ...errors(403, 404) },
        },
      },
      (req) => service.updateTheme(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/themes/:themeId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deleteTheme',
          summary: 'Delete a theme',
          description:
            'Forms that use it switch to the default theme. The default theme cannot be deleted (400 default_theme); ' +
            'a theme with lockedInUse that live forms use answers 409 theme_in_use. ' +
            notInSpec,
          params: themeParams,
          response: { 200: ThemeDeleted, ...errors(403, 404, 409) },
        },
      },
      (req) => service.deleteTheme(ctx, principal(req), req.params),
    );
  };
}
