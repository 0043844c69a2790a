import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import { errors } from '../../http/schemas.js';
import { Form } from '../forms/schemas.js';
import { ThemeDeleted, ThemeList } from '../themes/schemas.js';
import {
  FormCopyQuery,
  FormsUsingTheme,
  PageQuery,
  Subaccount,
  SubaccountCreate,
  SubaccountList,
  ThemeAssigned,
  ThemeAssignment,
  ThemeCopied,
  subaccountFormParams,
  subaccountParams,
  subaccountThemeParams,
} from './schemas.js';
import * as service from './service.js';

const tags = ['Subaccounts'];
// Only the parent account's owner and admins reach its subaccounts (members get 403 admin_required).
const read: RouteAccess = { scope: 'forms:read', role: 'admin' };
const write: RouteAccess = { scope: 'forms:write', role: 'admin' };
const more =
  "A subaccount that is not one of the caller's account answers 404 subaccount_not_found. Subaccounts: docs/subaccounts.md.";

export function subaccountRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/subaccount',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'listSubaccounts',
          summary: 'List the subaccounts of the current account',
          description: `Oldest first; pageNumber starts at 1. ${more}`,
          querystring: PageQuery,
          response: { 200: SubaccountList, ...errors(403) },
        },
      },
      (req) => service.listSubaccounts(ctx, principal(req), req.query),
    );

    app.post(
      '/subaccount',
      {
        config: { access: { scope: 'admin', role: 'admin' } },
        schema: {
          tags,
          operationId: 'createSubaccount',
          summary: 'Create a subaccount',
          description:
            'A full account of its own, owned by the current account, with an owner (email, name, optional password) and ' +
            'a default theme. No token is made for it: the parent reaches it through these routes, and its owner signs in ' +
            'with the password or is given a token by an operator (`formwork admin create-token`). ' +
            'The specification lists no way to create a subaccount; this is ours. ' +
            more,
          body: SubaccountCreate,
          response: { 201: Type.Ref(Subaccount), ...errors(403) },
        },
      },
      async (req, reply) =>
        reply
          .code(201)
          .send(
            await service.createSubaccount(
              ctx,
              principal(req),
              req.body,
              ctx.hasher.kdf({ account: principal(req).accountId }),
            ),
          ),
    );

    app.post(
      '/subaccount/:subaccountId/form/:formId/copy',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'copyFormToSubaccount',
          summary: 'Copy a form of the current account into a subaccount',
          description:
            'The copy ("<name> (copy)", at the top level, on the subaccount\'s default theme) has the fields and settings; ' +
            'withIntegrations copies the webhooks too, each with a new signing secret. Fields that take their options from ' +
            'a smart list keep its current options as their own. formId is a form of the current account (404 otherwise). ' +
            more,
          params: subaccountFormParams,
          querystring: FormCopyQuery,
          response: { 201: Type.Ref(Form), ...errors(403, 404) },
        },
      },
      async (req, reply) => reply.code(201).send(await service.copyForm(ctx, principal(req), req.params, req.query)),
    );

    app.put(
      '/subaccount/:subaccountId/forms/:formId/theme',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'assignSubaccountTheme',
          summary: 'Give a form of a subaccount one of its themes',
          description:
            'formId is a form of the subaccount (404 form_not_found otherwise; 400 invalid_form when it is deleted); ' +
            "themeId in the body a theme of the subaccount (400 invalid_theme otherwise). The form's hosted page shows it at once. " +
            more,
          params: subaccountFormParams,
          body: ThemeAssignment,
          response: { 200: ThemeAssigned, ...errors(403, 404) },
        },
      },
      (req) => service.assignTheme(ctx, principal(req), req.params, req.body),
    );

    app.post(
      '/subaccount/:subaccountId/theme/:themeId/copy',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'copyThemeToSubaccount',
          summary: 'Copy a theme of the current account into a subaccount',
          description:
            'The copy gets a new string id and is an ordinary theme of the subaccount (never its default). themeId is a ' +
            'theme of the current account (404 otherwise). ' +
            more,
          params: subaccountThemeParams,
          response: { 201: ThemeCopied, ...errors(403, 404) },
        },
      },
      async (req, reply) => reply.code(201).send(await service.copyTheme(ctx, principal(req), req.params)),
    );

    app.get(
      '/subaccount/:subaccountId/themes',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'listSubaccountThemes',
          summary: 'List the themes of a subaccount',
          description: `Its default theme first, then the others oldest first; pageNumber starts at 1. ${more}`,
          params: subaccountParams,
          querystring: PageQuery,
          response: { 200: ThemeList, ...errors(403, 404) },
        },
      },
      (req) => service.listThemes(ctx, principal(req), req.params, req.query),
    );

    app.delete(
      '/subaccount/:subaccountId/themes/:themeId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deleteSubaccountTheme',
          summary: 'Delete a theme of a subaccount',
          description:
            "Forms that use it switch to the subaccount's default theme. The default theme cannot be deleted " +
            '(400 default_theme); a theme with lockedInUse that live forms use answers 409 theme_in_use. ' +
            more,
          params: subaccountThemeParams,
          response: { 200: ThemeDeleted, ...errors(403, 404, 409) },
        },
      },
      (req) => service.deleteTheme(ctx, principal(req), req.params),
    );

    app.get(
      '/subaccount/:subaccountId/themes/:themeId/forms',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'listSubaccountThemeForms',
          summary: 'List the forms of a subaccount that use a theme',
          description: `Live forms, by id; pageNumber starts at 1. ${more}`,
          params: subaccountThemeParams,
          querystring: PageQuery,
          response: { 200: FormsUsingTheme, ...errors(403, 404) },
        },
      },
      (req) => service.formsUsingTheme(ctx, principal(req), req.params, req.query),
    );
  };
}
