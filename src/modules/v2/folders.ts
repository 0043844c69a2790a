/** v2 folders: /folder (list, create) and /folder/{id}; parent 0 is the top level. */
import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import { idParams } from '../../http/schemas.js';
import {
  FolderCreate,
  FolderUpdate,
  V2FolderListQuery,
  type Folder,
  type FolderListQuery,
} from '../folders/schemas.js';
import * as service from '../folders/service.js';
import { v2Route } from './route.js';
import { checked, deleted, fromV2, int, parametersOf, pick, str, v2List, v2Time } from './wire.js';

interface V2Folder {
  id: string;
  name: string;
  parent: string;
  forms_count: string;
  created: string | null;
  updated: string | null;
  subfolders: V2Folder[];
}

export function toV2Folder(f: Folder): V2Folder {
  return {
    id: str(f.id),
    name: f.name,
    parent: str(f.parent ?? 0),
    forms_count: str(f.formsCount),
    created: v2Time(f.created),
    updated: v2Time(f.updated),
    subfolders: f.subfolders.map(toV2Folder),
  };
}

const folderParams = idParams('folderId');

export function v2FolderRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    v2Route(app, {
      method: 'GET',
      url: '/folder',
      access: { scope: 'forms:read' },
      operationId: 'v2ListFolders',
      summary: 'v2: list the top-level folders with their subfolders (page, per_page from 1 to 100)',
      answer: '{"folders": [folder, …], "total": n, "pages": n}',
      handler: async (req) => {
        const q = checked<FolderListQuery>(
          V2FolderListQuery,
          pick(parametersOf(req), { page: ['page', int], page_number: ['page', int], per_page: ['perPage', int] }),
          'querystring',
        );
        const page = await service.listFolders(ctx, principal(req), q);
        return v2List('folders', page.folders.map(toV2Folder), page.total, page.pages);
      },
    });
    v2Route(app, {
      method: 'POST',
      url: '/folder',
      access: { scope: 'forms:write', role: 'admin' },
      operationId: 'v2CreateFolder',
      summary: 'v2: create a folder (name, parent; 0 is the top level)',
      body: true,
      created: true,
      answer: 'The folder',
      handler: async (req) => {
        const input = checked<FolderCreate>(FolderCreate, fromV2(parametersOf(req), FolderCreate));
        return toV2Folder(await service.createFolder(ctx, principal(req), input));
      },
    });
    v2Route(app, {
      method: 'GET',
      url: '/folder/:folderId',
      access: { scope: 'forms:read' },
      operationId: 'v2GetFolder',
      summary: 'v2: read a folder',
      params: folderParams,
      answer: 'The folder',
      handler: async (req) =>
        toV2Folder(await service.getFolder(ctx, principal(req), req.params as { folderId: number })),
    });
    v2Route(app, {
      method: 'PUT',
      url: '/folder/:folderId',
      access: { scope: 'forms:write', role: 'admin' },
      operationId: 'v2UpdateFolder',
      summary: 'v2: rename or move a folder',
      params: folderParams,
      body: true,
      answer: 'The folder',
      handler: async (req) => {
        const input = checked<FolderUpdate>(FolderUpdate, fromV2(parametersOf(req), FolderUpdate));
        return toV2Folder(await service.updateFolder(ctx, principal(req), req.params as { folderId: number }, input));
      },
    });
    v2Route(app, {
      method: 'DELETE',
      url: '/folder/:folderId',
      access: { scope: 'forms:write', role: 'admin' },
      operationId: 'v2DeleteFolder',
      summary: 'v2: delete a folder',
      params: folderParams,
      answer: '{"success": "1", "id": "<id>"}',
      handler: async (req) => {
        const { folderId } = req.params as { folderId: number };
        await service.deleteFolder(ctx, principal(req), { folderId });
        return deleted(folderId);
      },
    });
  };
}
