/** v2 portals: /portal, /portal/{id}, its copy, forms and users (the avatar stays a v2025 operation). */
import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../../context.js';
import type { RouteAccess } from '../../http/access.js';
import { idParams } from '../../http/schemas.js';
import {
  PortalCreate,
  PortalDetails,
  PortalForm,
  PortalFormCreate,
  PortalFormUpdate,
  PortalList,
  PortalQuery,
  PortalUpdate,
  PortalUser,
  PortalUserCreate,
  PortalUserUpdate,
} from '../portals/schemas.js';
import * as service from '../portals/service.js';
import { v2Translated } from './translated.js';

const read: RouteAccess = { scope: 'forms:read' };
const write: RouteAccess = { scope: 'forms:write', role: 'admin' };
const portal = idParams('portalId');
const portalForm = idParams('portalId', 'formId');
const portalUser = idParams('portalId', 'userId');
const one = 'The portal, with its forms and users';
const gone = '{"success": "1", "id": "<id>"}';

/* eslint-disable @typescript-eslint/no-explicit-any -- inputs are checked against the named schema first */
export function v2PortalRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    const add = (op: Parameters<typeof v2Translated>[2]) => v2Translated(app, ctx, op);
    add({
      method: 'GET',
      url: '/portal',
      access: read,
      operationId: 'v2ListPortals',
      summary: 'v2: list portals (page, per_page)',
      query: PortalQuery,
      reply: PortalList,
      answer: '{"portals": [portal, …], "total": n, "pages": n, …}',
      call: (c, who, _p, q) => service.listPortals(c, who, q as any),
    });
    add({
      method: 'POST',
      url: '/portal',
      access: write,
      operationId: 'v2CreatePortal',
      summary: 'v2: create a portal',
      body: PortalCreate,
      created: true,
      reply: PortalDetails,
      answer: one,
      call: (c, who, _p, b) => service.createPortal(c, who, b as any),
    });
    add({
      method: 'GET',
      url: '/portal/:portalId',
      access: read,
      operationId: 'v2GetPortal',
      summary: 'v2: read a portal',
      params: portal,
      reply: PortalDetails,
      answer: one,
      call: (c, who, p) => service.getPortal(c, who, p as any),
    });
    add({
      method: 'PUT',
      url: '/portal/:portalId',
      access: write,
      operationId: 'v2UpdatePortal',
      summary: 'v2: change a portal',
      params: portal,
      body: PortalUpdate,
      reply: PortalDetails,
      answer: one,
      call: (c, who, p, b) => service.updatePortal(c, who, p as any, b as any),
    });
    add({
      method: 'DELETE',
      url: '/portal/:portalId',
      access: write,
      operationId: 'v2DeletePortal',
      summary: 'v2: delete a portal',
      params: portal,
      deletes: 'portalId',
      answer: gone,
      call: (c, who, p) => service.deletePortal(c, who, p as any),
    });
    add({
      method: 'POST',
      url: '/portal/:portalId/copy',
      access: write,
      operationId: 'v2CopyPortal',
      summary: 'v2: copy a portal',
      params: portal,
      created: true,
      reply: PortalDetails,
      answer: one,
      call: (c, who, p) => service.copyPortal(c, who, p as any),
    });
    add({
      method: 'POST',
      url: '/portal/:portalId/form',
      access: write,
      operationId: 'v2AddPortalForm',
      summary: 'v2: add a form to a portal (form_id, …)',
      params: portal,
      body: PortalFormCreate,
      created: true,
      reply: PortalForm,
      answer: 'The portal form',
      call: (c, who, p, b) => service.addForm(c, who, p as any, b as any),
    });
    add({
      method: 'PUT',
      url: '/portal/:portalId/form/:formId',
      access: write,
      operationId: 'v2UpdatePortalForm',
      summary: 'v2: change a form of a portal',
      params: portalForm,
      body: PortalFormUpdate,
      reply: PortalForm,
      answer: 'The portal form',
      call: (c, who, p, b) => service.updateForm(c, who, p as any, b as any),
    });
    add({
      method: 'DELETE',
      url: '/portal/:portalId/form/:formId',
      access: write,
      operationId: 'v2RemovePortalForm',
      summary: 'v2: remove a form from a portal',
      params: portalForm,
      deletes: 'formId',
      answer: gone,
      call: (c, who, p) => service.removeForm(c, who, p as any),
    });
    add({
      method: 'POST',
      url: '/portal/:portalId/user',
      access: write,
      operationId: 'v2AddPortalUser',
      summary: 'v2: add a user to a portal',
      params: portal,
      body: PortalUserCreate,
      created: true,
      reply: PortalDetails,
      answer: one,
      call: (c, who, p, b) => service.addUser(c, who, p as any, b as any),
    });
    add({
      method: 'PUT',
      url: '/portal/:portalId/user/:userId',
      access: write,
      operationId: 'v2UpdatePortalUser',
      summary: 'v2: change a user of a portal',
      params: portalUser,
      body: PortalUserUpdate,
      reply: PortalUser,
      answer: 'The portal user',
      call: (c, who, p, b) => service.updateUser(c, who, p as any, b as any),
    });
    add({
      method: 'DELETE',
      url: '/portal/:portalId/user/:userId',
      access: write,
      operationId: 'v2RemovePortalUser',
      summary: 'v2: remove a user from a portal',
      params: portalUser,
      deletes: 'userId',
      answer: gone,
      call: (c, who, p) => service.removeUser(c, who, p as any),
    });
  };
}
