import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { errors, idParams } from '../../http/schemas.js';
import { Folder, FolderCreate, FolderDeleted, FolderList, FolderListQuery, FolderUpdate } from './schemas.js';
import * as service from './service.js';

const tags = ['Folders'];
const params = idParams('folderId');

export function folderRoutes(ctx: AppContext): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/folders',
      {
        config: { access: { scope: 'forms:read' } },
        schema: {
          tags,
          operationId: 'listFolders',
          summary: 'List top-level folders with their subfolders',
          querystring: FolderListQuery,
          response: { 200: FolderList, ...errors() },
        },
      },
      (req) => service.listFolders(ctx, principal(req), req.query),
    );

    app.post(
      '/folders',
      {
        config: { access: { scope: 'forms:write', role: 'admin' } },
        schema: {
          tags,
          operationId: 'createFolder',
          summary: 'Create a folder',
          body: FolderCreate,
          response: { 200: Type.Ref(Folder), ...errors(403, 404) },
        },
      },
      (req) => service.createFolder(ctx, principal(req), req.body),
    );

    app.get(
      '/folders/:folderId',
      {
        config: { access: { scope: 'forms:read' } },
        schema: {
          tags,
          operationId: 'getFolder',
          summary: 'Read a folder or subfolder',
          params,
          response: { 200: Type.Ref(Folder), ...errors(403, 404) },
        },
      },
      (req) => service.getFolder(ctx, principal(req), { folderId: req.params.folderId }),
    );

    app.put(
      '/folders/:folderId',
      {
        config: { access: { scope: 'forms:write', role: 'admin' } },
        schema: {
          tags,
          operationId: 'updateFolder',
          summary: 'Rename or move a folder',
          params,
          body: FolderUpdate,
          response: { 200: Type.Ref(Folder), ...errors(403, 404) },
        },
      },
      (req) => service.updateFolder(ctx, principal(req), { folderId: req.params.folderId }, req.body),
    );

    app.delete(
      '/folders/:folderId',
      {
        config: { access: { scope: 'forms:write', role: 'admin' } },
        schema: {
          tags,
          operationId: 'deleteFolder',
          summary: 'Delete a folder',
          description:
            "Forms and subfolders inside move up to the folder's parent, or to the top level; no form is deleted.",
          params,
          response: { 200: FolderDeleted, ...errors(403, 404) },
        },
      },
      (req) => service.deleteFolder(ctx, principal(req), { folderId: req.params.folderId }),
    );
  };
}
