/** v2 fields: /form/{id}/field and /field/{id} (no form in the path). */
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { NotFoundError } from '../../errors.js';
import { principal } from '../../http/auth.js';
import { idParams } from '../../http/schemas.js';
import { FieldCreate, FieldUpdate, type Field } from '../fields/schemas.js';
import * as service from '../fields/service.js';
import { formOfField } from '../permissions/repository.js';
import { v2Route } from './route.js';
import { bool, checked, deleted, flag, int, list, parametersOf, pick, str, v2List, type Params } from './wire.js';

/** A field as v2 writes it. */
export function toV2Field(f: Field) {
  return {
    id: str(f.id),
    form: str(f.formId),
    label: f.label,
    hide_label: flag(f.hideLabel),
    description: f.description,
    type: f.type,
    options: f.options.map((o) => ({ label: o.label, value: o.value })),
    required: flag(f.required),
    uniq: flag(f.unique),
    hidden: flag(f.hidden),
    readonly: flag(f.readOnly),
    colspan: str(f.columnSpan),
    sort: str(f.displayOrder),
    default: f.defaultValue ?? '',
    logic: f.logic
      ? {
          action: f.logic.action,
          conditional: f.logic.conditional,
          checks: f.logic.checks.map((c) => ({ field: str(c.field), condition: c.condition, option: c.option ?? '' })),
        }
      : null,
    attributes: f.attributes,
  };
}

/** options (labels, as a list or comma-separated) with options_values (the values, in the same order). */
function options(params: Params): unknown {
  const labels = list(params.options);
  if (!Array.isArray(labels)) return labels;
  const values = list(params.options_values);
  return labels.map((label, i) =>
    typeof label === 'object' && label !== null
      ? label
      : { label, value: Array.isArray(values) && values[i] !== undefined ? values[i] : label },
  );
}

/** The v2025 field input of v2 parameters; unknown ones are ignored, as the original did. */
export function fieldInput(params: Params): Params {
  const input = pick(params, {
    field_type: ['type'],
    type: ['type'],
    label: ['label'],
    hide_label: ['hideLabel', bool],
    description: ['description'],
    required: ['required', bool],
    uniq: ['unique', bool],
    hidden: ['hidden', bool],
    readonly: ['readOnly', bool],
    colspan: ['columnSpan', int],
    sort: ['displayOrder', int],
    default: ['defaultValue'],
    attributes: ['attributes'],
  });
  if (params.options !== undefined) input.options = options(params);
  return input;
}

const formParams = idParams('formId');
const fieldParams = idParams('fieldId');

/** v2 names a field by its id alone: the caller, and the field with the form it belongs to (404 when not the caller's). */
async function fieldOf(ctx: AppContext, req: FastifyRequest) {
  const { fieldId } = req.params as { fieldId: number };
  const caller = principal(req);
  const formId = await formOfField(ctx.db, caller.accountId, fieldId);
  if (formId === undefined) throw new NotFoundError('field_not_found');
  return { caller, ref: { formId, fieldId } };
}

export function v2FieldRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    v2Route(app, {
      method: 'GET',
      url: '/form/:formId/field',
      access: { scope: 'forms:read', level: 'view', formFrom: 'formId' },
      operationId: 'v2ListFields',
      summary: 'v2: the fields of a form',
      params: formParams,
      answer: '{"fields": [field, …], "total": n, "pages": 1}',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const all = await service.listFields(ctx, principal(req), { formId });
        return v2List('fields', all.fields.map(toV2Field), all.total, 1);
      },
    });
    v2Route(app, {
      method: 'POST',
      url: '/form/:formId/field',
      access: { scope: 'forms:write', level: 'edit', formFrom: 'formId' },
      operationId: 'v2CreateField',
      summary: 'v2: add a field (field_type, label, required, options, options_values, …)',
      params: formParams,
      body: true,
      created: true,
      answer: 'The field',
      handler: async (req) => {
        const { formId } = req.params as { formId: number };
        const input = checked<FieldCreate>(FieldCreate, fieldInput(parametersOf(req)));
        return toV2Field(await service.createField(ctx, principal(req), { formId }, input));
      },
    });
    v2Route(app, {
      method: 'GET',
      url: '/field/:fieldId',
      access: { scope: 'forms:read', level: 'view', formFrom: 'fieldId' },
      operationId: 'v2GetField',
      summary: 'v2: read a field',
      params: fieldParams,
      answer: 'The field',
      handler: async (req) => {
        const { caller, ref } = await fieldOf(ctx, req);
        return toV2Field(await service.getField(ctx, caller, ref));
      },
    });
    v2Route(app, {
      method: 'PUT',
      url: '/field/:fieldId',
      access: { scope: 'forms:write', level: 'edit', formFrom: 'fieldId' },
      operationId: 'v2UpdateField',
      summary: 'v2: change a field; only the parameters sent change',
      params: fieldParams,
      body: true,
      answer: 'The field',
      handler: async (req) => {
        const { caller, ref } = await fieldOf(ctx, req);
        const input = checked<FieldUpdate>(FieldUpdate, fieldInput(parametersOf(req)));
        return toV2Field(await service.updateField(ctx, caller, ref, input));
      },
    });
    v2Route(app, {
      method: 'DELETE',
      url: '/field/:fieldId',
      access: { scope: 'forms:write', level: 'edit', formFrom: 'fieldId' },
      operationId: 'v2DeleteField',
      summary: 'v2: delete a field',
      params: fieldParams,
      answer: '{"success": "1", "id": "<id>"}',
      handler: async (req) => {
        const { caller, ref } = await fieldOf(ctx, req);
        return deleted((await service.deleteField(ctx, caller, ref)).id);
      },
    });
  };
}
