import { Type, type Static } from '@sinclair/typebox';
import { Id, StringEnum, Timestamp } from '../../http/schemas.js';
import { FIELD_TYPES, LOGIC_CONDITIONS } from './types.js';

export const MAX_FIELDS_PER_FORM = 500;
/** The largest displayOrder a request may send. */
export const MAX_DISPLAY_ORDER = 100_000;

const FieldTypeSchema = StringEnum(FIELD_TYPES, {
  description: 'Field type; decides which attributes, options and default value make sense',
});

export const FieldOption = Type.Object(
  { label: Type.String({ minLength: 1, maxLength: 500 }), value: Type.String({ minLength: 1, maxLength: 500 }) },
  { additionalProperties: false },
);

const SmartListSetting = Type.Union([Id, Type.Null()], {
  description:
    'A smart list of the account that a select, radio or checkbox field takes its options from: the field then shows ' +
    "the list's current options, and submissions are checked against them. null (the default): the field holds its own " +
    'options; setting null on a field that used a list keeps the options it showed as its own.',
});

export const FieldLogic = Type.Object(
  {
    action: StringEnum(['show', 'hide']),
    conditional: StringEnum(['all', 'any']),
    checks: Type.Array(
      Type.Object(
        {
          field: Id,
          condition: StringEnum(LOGIC_CONDITIONS),
          option: Type.Optional(
            Type.String({ maxLength: 500, description: 'The value compared with; not needed for empty and notempty' }),
          ),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 50 },
    ),
  },
  {
    additionalProperties: false,
    description: 'Shows or hides the field when all or any checks on other fields of the form hold',
  },
);

export const DefaultValue = Type.Union(
  [
    Type.String({ maxLength: 10_000 }),
    Type.Number(),
    Type.Array(Type.String({ maxLength: 500 }), { maxItems: 500 }),
    Type.Record(Type.String({ maxLength: 20 }), Type.String({ maxLength: 500 })),
    Type.Null(),
  ],
  {
    description:
      'A string, a number, a list of option values (checkbox) or subfield values (name, address); ' +
      'taken only if the field would take it as a submitted value (a date in its range, an email address, a number within min and max, …)',
  },
);

// No `default` keywords here: the validator would fill them into updates and overwrite stored
// values. withDefaults() applies the defaults on create.
const fieldProperties = {
  type: FieldTypeSchema,
  label: Type.String({ minLength: 1, maxLength: 1000 }),
  hideLabel: Type.Boolean({ description: 'default false' }),
  description: Type.String({ maxLength: 10_000, description: 'Help text; default empty' }),
  defaultValue: DefaultValue,
  required: Type.Boolean({ description: 'default false; a field hidden by its logic is not required' }),
  readOnly: Type.Boolean({ description: 'default false' }),
  hidden: Type.Boolean({ description: 'default false' }),
  unique: Type.Boolean({ description: 'Two submissions may not hold the same value; default false' }),
  columnSpan: Type.Integer({ minimum: 1, maximum: 12, description: 'Width on a 12-column grid; default 12' }),
  displayOrder: Type.Integer({
    minimum: 0,
    maximum: MAX_DISPLAY_ORDER,
    description: 'Position; appended after the last field when left out',
  }),
  attributes: Type.Record(Type.String({ maxLength: 50 }), Type.Unknown(), {
    description: 'Type-specific settings, see the field types',
  }),
  options: Type.Array(FieldOption, {
    maxItems: 1000,
    description:
      "Choices of select, radio and checkbox fields; left out, empty or the list's current ones (as a record read shows them) when smartList gives them",
  }),
  smartList: SmartListSetting,
  logic: Type.Union([FieldLogic, Type.Null()]),
};

const { type, label, ...optionalProperties } = fieldProperties;

export const FieldCreate = Type.Composite(
  [Type.Object({ type, label }), Type.Partial(Type.Object(optionalProperties))],
  {
    additionalProperties: false,
    title: 'FieldCreate',
  },
);
export type FieldCreate = Static<typeof FieldCreate>;

export const FieldUpdate = Type.Partial(Type.Object(fieldProperties), {
  additionalProperties: false,
  minProperties: 1,
  title: 'FieldUpdate',
  description: 'Only the properties sent change',
});
export type FieldUpdate = Static<typeof FieldUpdate>;

export const Field = Type.Object(
  {
    id: Id,
    formId: Id,
    type: FieldTypeSchema,
    label: Type.String(),
    hideLabel: Type.Boolean(),
    description: Type.String(),
    defaultValue: DefaultValue,
    required: Type.Boolean(),
    readOnly: Type.Boolean(),
    hidden: Type.Boolean(),
    unique: Type.Boolean(),
    columnSpan: Type.Integer(),
    displayOrder: Type.Integer(),
    attributes: Type.Record(Type.String(), Type.Unknown()),
    options: Type.Array(FieldOption, { description: "The field's own options, or its smart list's current ones" }),
    smartList: SmartListSetting,
    logic: Type.Union([FieldLogic, Type.Null()]),
    created: Timestamp,
    updated: Timestamp,
  },
  { $id: 'Field', title: 'Field' },
);
export type Field = Static<typeof Field>;
export type FieldLogic = Static<typeof FieldLogic>;

export const FieldPreview = Type.Object({ id: Id, formId: Id, type: FieldTypeSchema, label: Type.String() });
