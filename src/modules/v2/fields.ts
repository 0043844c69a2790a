/** v2 fields: /form/{id}/field and /field/{id} (no form in the path). */
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { NotFoundError } from '../../errors.js';
import { principal } from '../../http/auth.js';
import { idParams } from '../../http/schemas.js';
import { FieldCreate, FieldUpdate, type Field } from '../fields/schemas.js';
import * as service from '../fields/service.js';
import { TYPE_RULES, type FieldType } from '../fields/types.js';
import { formOfField } from '../permissions/repository.js';
import { v2Route } from './route.js';
import { checked, deleted, flag, fromV2, list, parametersOf, readAs, snake, str, v2List, type Params } from './wire.js';

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
    // The list the options come from, named as `smart_list` is sent, so that the field can be sent back as read.
    smart_list: f.smartList === null ? null : str(f.smartList),
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
    // In snake_case, as attributes[max_length] is written: what is read can be sent back.
    attributes: Object.fromEntries(Object.entries(f.attributes).map(([k, v]) => [snake(k), v])),
  };
}

/**
 * options (labels, as a list or comma-separated) with options_values (the values, in the same
 * order), or as {label, value} objects (`options[n][label]`, `options[n][value]`); the label is
 * the value when it has none.
 */
function options(params: Params): unknown {
  const labels = list(params.options);
  if (!Array.isArray(labels)) return labels;
  const values = list(params.options_values);
  return labels.map((label, i) => {
    if (typeof label === 'object' && label !== null) {
      const o = label as Params;
      return o.value === undefined && o.label !== undefined && !Array.isArray(o) ? { ...o, value: o.label } : o;
    }
    return { label, value: Array.isArray(values) && values[i] !== undefined ? values[i] : label };
  });
}

/** v2's names of field properties whose v2025 name is not their camelCase. */
const FIELD_RENAMES: Record<string, string> = {
  field_type: 'type',
  uniq: 'unique',
  readonly: 'readOnly',
  colspan: 'columnSpan',
  sort: 'displayOrder',
  default: 'defaultValue',
};

const isFieldType = (t: unknown): t is FieldType => typeof t === 'string' && Object.hasOwn(TYPE_RULES, t);

/**
 * The v2025 field input of v2 parameters, read by the v2025 schema at every level: `logic`
 * (`logic[checks][0][field]=12`), `options`, and `attributes` and `default` as the field's
 * type has them (`currentType`: the type of the field being changed, when no type is given).
 * Unknown names are ignored at every level, as the original did.
 */
export function fieldInput(params: Params, currentType?: FieldType): Params {
  const { options: _options, options_values: _values, type, ...rest } = params;
  // `type` wins over `field_type` when both are given.
  const input = fromV2(type === undefined ? rest : { ...rest, field_type: type }, FieldUpdate, FIELD_RENAMES);
  if (params.options !== undefined) input.options = readAs(options(params), FieldUpdate.properties.options);
  const fieldType = isFieldType(input.type) ? input.type : currentType;
  const rule = fieldType === undefined ? undefined : TYPE_RULES[fieldType];
  if (rule && params.attributes !== undefined) input.attributes = readAs(params.attributes, rule.attributes);
  if (rule?.defaultValue === 'number' && params.default !== undefined)
    input.defaultValue = readAs(params.default, Type.Union([Type.Number(), Type.Null()]));
  return input;
}

/** Whether reading the parameters takes the type of the field they change (attributes, default). */
const needsType = (params: Params) =>
  params.type === undefined &&
  params.field_type === undefined &&
  (params.attributes !== undefined || params.default !== undefined);

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
        const params = parametersOf(req);
        const current = needsType(params) ? (await service.getField(ctx, caller, ref)).type : undefined;
        const input = checked<FieldUpdate>(FieldUpdate, fieldInput(params, current));
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
