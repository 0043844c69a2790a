/** v2 smart lists: /smartlist, /smartlist/{id}, its options (one, all, in bulk). */
import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { idParams } from '../../http/schemas.js';
import {
  BulkAdded,
  BulkOptions,
  OptionCreate,
  OptionList,
  OptionQuery,
  OptionUpdate,
  SmartList,
  SmartListCreate,
  SmartListList,
  SmartListOption,
  SmartListQuery,
  SmartListUpdate,
} from '../smartlists/schemas.js';
import * as service from '../smartlists/service.js';
import { v2Translated } from './translated.js';

const read: RouteAccess = { scope: 'forms:read' };
const write: RouteAccess = { scope: 'forms:write', role: 'admin' };
const list = idParams('smartListId');
const option = idParams('smartListId', 'optionId');
const gone = '{"success": "1", "id": "<id>"}';

/* eslint-disable @typescript-eslint/no-explicit-any -- inputs are checked against the named schema first */
export function v2SmartListRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    const add = (op: Parameters<typeof v2Translated>[2]) => v2Translated(app, ctx, op);
    add({
      method: 'GET',
      url: '/smartlist',
      access: read,
      operationId: 'v2ListSmartLists',
      summary: 'v2: list smart lists (page, per_page, query)',
      query: SmartListQuery,
      reply: SmartListList,
      answer: '{"smart_lists": [smart list, …], "total": n, "pages": n, …}',
      call: (c, who, _p, q) => service.listLists(c, who, q as any),
    });
    add({
      method: 'POST',
      url: '/smartlist',
      access: write,
      operationId: 'v2CreateSmartList',
      summary: 'v2: create a smart list',
      body: SmartListCreate,
      created: true,
      reply: SmartList,
      answer: 'The smart list',
      call: (c, who, _p, b) => service.createList(c, who, b as any),
    });
    add({
      method: 'GET',
      url: '/smartlist/:smartListId',
      access: read,
      operationId: 'v2GetSmartList',
      summary: 'v2: read a smart list',
      params: list,
      reply: SmartList,
      answer: 'The smart list',
      call: (c, who, p) => service.getList(c, who, p as any),
    });
    add({
      method: 'PUT',
      url: '/smartlist/:smartListId',
      access: write,
      operationId: 'v2UpdateSmartList',
      summary: 'v2: change a smart list',
      params: list,
      body: SmartListUpdate,
      reply: SmartList,
      answer: 'The smart list',
      call: (c, who, p, b) => service.updateList(c, who, p as any, b as any),
    });
    add({
      method: 'DELETE',
      url: '/smartlist/:smartListId',
      access: write,
      operationId: 'v2DeleteSmartList',
      summary: 'v2: delete a smart list',
      params: list,
      deletes: 'smartListId',
      answer: gone,
      call: (c, who, p) => service.deleteList(c, who, p as any),
    });
    add({
      method: 'GET',
      url: '/smartlist/:smartListId/option',
      access: read,
      operationId: 'v2ListSmartListOptions',
      summary: 'v2: the options of a smart list (page, per_page, query)',
      params: list,
      query: OptionQuery,
      reply: OptionList,
      answer: '{"options": [option, …], "total": n, "pages": n, …}',
      call: (c, who, p, q) => service.listOptions(c, who, p as any, q as any),
    });
    add({
      method: 'POST',
      url: '/smartlist/:smartListId/option',
      access: write,
      operationId: 'v2CreateSmartListOption',
      summary: 'v2: add an option (label, value, order)',
      params: list,
      body: OptionCreate,
      created: true,
      reply: SmartListOption,
      answer: 'The option',
      call: (c, who, p, b) => service.createOption(c, who, p as any, b as any),
    });
    add({
      method: 'POST',
      url: '/smartlist/:smartListId/bulkoptions',
      access: write,
      operationId: 'v2AddSmartListOptions',
      summary: 'v2: add options in bulk (options[n][label], options[n][value])',
      params: list,
      body: BulkOptions,
      reply: BulkAdded,
      answer: '{"id": "<list id>", "added": n}',
      call: (c, who, p, b) => service.addOptions(c, who, p as any, b as any),
    });
    add({
      method: 'DELETE',
      url: '/smartlist/:smartListId/alloptions',
      access: write,
      operationId: 'v2DeleteAllSmartListOptions',
      summary: 'v2: delete every option of a smart list',
      params: list,
      deletes: 'smartListId',
      answer: gone,
      call: (c, who, p) => service.deleteAllOptions(c, who, p as any),
    });
    add({
      method: 'GET',
      url: '/smartlist/:smartListId/option/:optionId',
      access: read,
      operationId: 'v2GetSmartListOption',
      summary: 'v2: read an option',
      params: option,
      reply: SmartListOption,
      answer: 'The option',
      call: (c, who, p) => service.getOption(c, who, p as any),
    });
    add({
      method: 'PUT',
      url: '/smartlist/:smartListId/option/:optionId',
      access: write,
      operationId: 'v2UpdateSmartListOption',
      summary: 'v2: change an option',
      params: option,
      body: OptionUpdate,
      reply: SmartListOption,
      answer: 'The option',
      call: (c, who, p, b) => service.updateOption(c, who, p as any, b as any),
    });
    add({
      method: 'DELETE',
      url: '/smartlist/:smartListId/option/:optionId',
      access: write,
      operationId: 'v2DeleteSmartListOption',
      summary: 'v2: delete an option',
      params: option,
      deletes: 'optionId',
      answer: gone,
      call: (c, who, p) => service.deleteOption(c, who, p as any),
    });
  };
}
