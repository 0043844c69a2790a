import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { imageBodyValidator, readImage, withMultipart } from '../images/route.js';
import {
  AllOptionsDeleted,
  BulkAdded,
  BulkOptions,
  MAX_BULK_OPTIONS,
  MAX_OPTIONS_PER_FORM,
  MAX_OPTIONS_PER_LIST,
  OptionCreate,
  OptionDeleted,
  OptionImageDeleted,
  OptionImageUpload,
  OptionList,
  OptionQuery,
  OptionUpdate,
  SmartList,
  SmartListCreate,
  SmartListDeleted,
  SmartListList,
  SmartListOption,
  SmartListQuery,
  SmartListUpdate,
} from './schemas.js';
import * as service from './service.js';

const tags = ['Smart lists'];
const listParams = idParams('smartListId');
const optionParams = idParams('smartListId', 'optionId');
// Members read the account's lists (to use them on fields of forms they may edit); owners and admins manage them.
const read: RouteAccess = { scope: 'forms:read' };
const write: RouteAccess = { scope: 'forms:write', role: 'admin' };
const more = 'Smart lists: docs/smartlists.md.';

export function smartListRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/smartlists',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'listSmartLists',
          summary: 'List smart lists',
          description: `Sorted by name without regard to case. ${more}`,
          querystring: SmartListQuery,
          response: { 200: SmartListList, ...errors(403) },
        },
      },
      (req) => service.listLists(ctx, principal(req), req.query),
    );

    app.post(
      '/smartlists',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'createSmartList',
          summary: 'Create a smart list',
          description: `A reusable list of options that select, radio and checkbox fields can take theirs from (the field's smartList). ${more}`,
          body: SmartListCreate,
          response: { 201: Type.Ref(SmartList), ...errors(403) },
        },
      },
      async (req, reply) => reply.code(201).send(await service.createList(ctx, principal(req), req.body)),
    );

    app.get(
      '/smartlists/:smartListId',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'getSmartList',
          summary: 'Read a smart list',
          params: listParams,
          response: { 200: Type.Ref(SmartList), ...errors(403, 404) },
        },
      },
      (req) => service.getList(ctx, principal(req), req.params),
    );

    app.put(
      '/smartlists/:smartListId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'updateSmartList',
          summary: 'Rename a smart list or change whether it uses images',
          params: listParams,
          body: SmartListUpdate,
          response: { 200: Type.Ref(SmartList), ...errors(403, 404) },
        },
      },
      (req) => service.updateList(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/smartlists/:smartListId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deleteSmartList',
          summary: 'Delete a smart list with its options',
          description:
            'While a field of a live form takes its options from the list, the answer is 409 smart_list_in_use, ' +
            'naming each such field and its form. Fields of deleted forms keep the options they showed, as their own.',
          params: listParams,
          response: { 200: SmartListDeleted, ...errors(403, 404, 409) },
        },
      },
      (req) => service.deleteList(ctx, principal(req), req.params),
    );

    app.get(
      '/smartlists/:smartListId/options',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'listSmartListOptions',
          summary: 'List the options of a smart list',
          description: 'In list order: by order, then by id.',
          params: listParams,
          querystring: OptionQuery,
          response: { 200: OptionList, ...errors(403, 404) },
        },
      },
      (req) => service.listOptions(ctx, principal(req), req.params, req.query),
    );

    app.post(
      '/smartlists/:smartListId/options',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'createSmartListOption',
          summary: 'Add an option to a smart list',
          description:
            'A value already in the list is 400 invalid_options. Fields that use the list show the option at once. ' +
            `A list holds at most ${MAX_OPTIONS_PER_LIST} options, and a form shows at most ${MAX_OPTIONS_PER_FORM}: ` +
            'an option that a live form using the list could not show is 400 too_many_options, naming the form and fields.',
          params: listParams,
          body: OptionCreate,
          response: { 201: Type.Ref(SmartListOption), ...errors(403, 404) },
        },
      },
      async (req, reply) => reply.code(201).send(await service.createOption(ctx, principal(req), req.params, req.body)),
    );

    app.post(
      '/smartlists/:smartListId/bulkoptions',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'addSmartListOptions',
          summary: 'Add many options to a smart list at once',
          description:
            `Appends up to ${MAX_BULK_OPTIONS} options after the last one, in the order sent, in one transaction; ` +
            'it never replaces (DELETE .../alloptions first to replace the list). An entry whose value is already in ' +
            'the list, or repeats the value of an earlier entry, makes the whole call a 400 invalid_options that names ' +
            'every such entry by its index (body.options[i]) and writes nothing. ' +
            `A form shows at most ${MAX_OPTIONS_PER_FORM} options across its fields (a list once per field that uses it): ` +
            'options that would take a live form that uses the list past that are 400 too_many_options, naming each such ' +
            'form and field, and nothing is written.',
          params: listParams,
          body: BulkOptions,
          response: { 200: BulkAdded, ...errors(403, 404) },
        },
      },
      (req) => service.addOptions(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/smartlists/:smartListId/alloptions',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deleteAllSmartListOptions',
          summary: 'Remove every option of a smart list',
          description: 'The list itself stays, empty; fields that use it then offer no choice.',
          params: listParams,
          response: { 200: AllOptionsDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.deleteAllOptions(ctx, principal(req), req.params),
    );

    app.get(
      '/smartlists/:smartListId/options/:optionId',
      {
        config: { access: read },
        schema: {
          tags,
          operationId: 'getSmartListOption',
          summary: 'Read an option of a smart list',
          params: optionParams,
          response: { 200: Type.Ref(SmartListOption), ...errors(403, 404) },
        },
      },
      (req) => service.getOption(ctx, principal(req), req.params),
    );

    app.put(
      '/smartlists/:smartListId/options/:optionId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'updateSmartListOption',
          summary: 'Change an option of a smart list',
          description:
            'A new value that another option holds is 400 invalid_options. Submissions keep the value they stored.',
          params: optionParams,
          body: OptionUpdate,
          response: { 200: Type.Ref(SmartListOption), ...errors(403, 404) },
        },
      },
      (req) => service.updateOption(ctx, principal(req), req.params, req.body),
    );

    app.delete(
      '/smartlists/:smartListId/options/:optionId',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deleteSmartListOption',
          summary: 'Remove an option from a smart list',
          params: optionParams,
          response: { 200: OptionDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.deleteOption(ctx, principal(req), req.params),
    );

    // Multipart bodies are read on this route only: the rest of the API takes JSON alone.
    await withMultipart(app, (scope) => {
      const images = scope.withTypeProvider<TypeBoxTypeProvider>();
      images.post(
        '/smartlists/:smartListId/options/:optionId/image',
        {
          config: { access: write, streamedBody: true },
          validatorCompiler: imageBodyValidator,
          schema: {
            tags,
            operationId: 'setSmartListOptionImage',
            summary: 'Set or remove the image of an option',
            description:
              'multipart/form-data with one part named image: a PNG, JPEG, GIF or WebP file, told by its bytes ' +
              `(not its name or declared type), of at most OPTION_IMAGE_MAX_BYTES (${ctx.config.optionImageMaxBytes} here). ` +
              'An empty file part, a part whose value is empty or null, no part, or no body at all removes the image. ' +
              'A body must end with its closing boundary (--boundary--): one cut short or sent under another boundary is refused. ' +
              'Anything else is 400 invalid_image, and a list whose useImages is off answers 400 images_not_used. ' +
              'A new image replaces the old one, whose file is removed once the change commits.',
            consumes: ['multipart/form-data'],
            'x-formwork-body-optional': true,
            params: optionParams,
            body: OptionImageUpload,
            response: { 200: Type.Ref(SmartListOption), ...errors(403, 404) },
          },
        },
        (req) => service.setOptionImage(ctx, principal(req), req.params, () => readImage(ctx, req)),
      );
    });

    app.delete(
      '/smartlists/:smartListId/options/:optionId/image',
      {
        config: { access: write },
        schema: {
          tags,
          operationId: 'deleteSmartListOptionImage',
          summary: 'Remove the image of an option',
          description:
            'Answers 200 when the option has no image too; 400 images_not_used when the list does not use images.',
          params: optionParams,
          response: { 200: OptionImageDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.removeOptionImage(ctx, principal(req), req.params),
    );
  };
}
