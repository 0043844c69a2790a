import { Type, type TObject } from '@sinclair/typebox';
import { StringEnum } from '../../http/schemas.js';

/**
 * What each field type is: whether it takes input, whether it has options, which
 * attributes it understands and what default value it can hold. Every rule about field
 * definitions that depends on the type lives here.
 */
export const FIELD_TYPES = [
  'text',
  'textarea',
  'name',
  'address',
  'email',
  'phone',
  'creditcard',
  'datetime',
  'file',
  'signature',
  'number',
  'select',
  'radio',
  'checkbox',
  'matrix',
  'richtext',
  'embed',
  'product',
  'section',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export const NAME_SUBFIELDS = ['prefix', 'first', 'middle', 'initial', 'last', 'suffix'] as const;
export const ADDRESS_SUBFIELDS = ['address', 'address2', 'city', 'state', 'zip', 'country'] as const;

const placeholder = Type.String({ maxLength: 200 });
const length = Type.Integer({ minimum: 0, maximum: 100_000 });
const date = Type.String({ format: 'date' });
const layout = StringEnum(['vertical', 'horizontal']);
const html = Type.String({ maxLength: 100_000 });
const strict = { additionalProperties: false } as const;

export const DEFAULT_MAX_FILES = 1;
export const DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024;

type DefaultKind = 'string' | 'number' | 'option' | 'options' | 'name' | 'address' | 'none';

interface TypeRule {
  /** Takes a value from the person filling in the form. */
  input: boolean;
  /** Holds an options list, which must then have at least one entry. */
  options: boolean;
  /** unique makes sense: values can be compared. */
  uniqueAllowed: boolean;
  defaultValue: DefaultKind;
  attributes: TObject;
  /** Rules that span attributes, as [attribute, message] for the first one broken. */
  check?: (attributes: Record<string, unknown>) => [string, string] | undefined;
}

const minMax =
  (min: string, max: string) =>
  (a: Record<string, unknown>): [string, string] | undefined =>
    typeof a[min] === 'number' && typeof a[max] === 'number' && a[min] > a[max]
      ? [min, `must not be greater than ${max}`]
      : undefined;

const dateRange = (a: Record<string, unknown>): [string, string] | undefined =>
  typeof a.minDate === 'string' && typeof a.maxDate === 'string' && a.minDate > a.maxDate
    ? ['minDate', 'must not be after maxDate']
    : undefined;

export const TYPE_RULES: Record<FieldType, TypeRule> = {
  text: {
    input: true,
    options: false,
    uniqueAllowed: true,
    defaultValue: 'string',
    attributes: Type.Object(
      { placeholder: Type.Optional(placeholder), minLength: Type.Optional(length), maxLength: Type.Optional(length) },
      strict,
    ),
    check: minMax('minLength', 'maxLength'),
  },
  textarea: {
    input: true,
    options: false,
    uniqueAllowed: true,
    defaultValue: 'string',
    attributes: Type.Object(
      {
        placeholder: Type.Optional(placeholder),
        minLength: Type.Optional(length),
        maxLength: Type.Optional(length),
        rows: Type.Optional(Type.Integer({ minimum: 1, maximum: 50 })),
      },
      strict,
    ),
    check: minMax('minLength', 'maxLength'),
  },
  name: {
    input: true,
    options: false,
    uniqueAllowed: true,
    defaultValue: 'name',
    attributes: Type.Object(
      {
        showPrefix: Type.Optional(Type.Boolean()),
        showMiddle: Type.Optional(Type.Boolean()),
        showInitial: Type.Optional(Type.Boolean()),
        showSuffix: Type.Optional(Type.Boolean()),
      },
      strict,
    ),
  },
  address: {
    input: true,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'address',
    attributes: Type.Object(
      {
        format: Type.Optional(StringEnum(['us', 'international'])),
        showAddress2: Type.Optional(Type.Boolean()),
        showCountry: Type.Optional(Type.Boolean()),
        defaultCountry: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2' })),
      },
      strict,
    ),
  },
  email: {
    input: true,
    options: false,
    uniqueAllowed: true,
    defaultValue: 'string',
    attributes: Type.Object(
      { placeholder: Type.Optional(placeholder), confirm: Type.Optional(Type.Boolean()) },
      strict,
    ),
  },
  phone: {
    input: true,
    options: false,
    uniqueAllowed: true,
    defaultValue: 'string',
    attributes: Type.Object(
      { placeholder: Type.Optional(placeholder), format: Type.Optional(StringEnum(['us', 'international'])) },
      strict,
    ),
  },
  creditcard: {
    input: true,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object(
      {
        cardTypes: Type.Optional(
          Type.Array(StringEnum(['visa', 'mastercard', 'amex', 'discover', 'dinersclub', 'jcb']), {
            minItems: 1,
            uniqueItems: true,
          }),
        ),
      },
      strict,
    ),
  },
  datetime: {
    input: true,
    options: false,
    uniqueAllowed: true,
    defaultValue: 'string',
    attributes: Type.Object(
      {
        format: Type.Optional(StringEnum(['date', 'time', 'datetime'])),
        minDate: Type.Optional(date),
        maxDate: Type.Optional(date),
      },
      strict,
    ),
    check: dateRange,
  },
  file: {
    input: true,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object(
      {
        maxFiles: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, default: DEFAULT_MAX_FILES })),
        maxFileSize: Type.Optional(
          Type.Integer({ minimum: 1, maximum: 1024 ** 3, default: DEFAULT_MAX_FILE_SIZE, description: 'bytes' }),
        ),
        allowedTypes: Type.Optional(
          Type.Array(Type.String({ pattern: '^[a-z0-9]{1,10}$', description: 'file extension' }), {
            maxItems: 50,
            uniqueItems: true,
          }),
        ),
      },
      strict,
    ),
  },
  signature: {
    input: true,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object(
      {
        maxFileSize: Type.Optional(
          Type.Integer({ minimum: 1, maximum: 10 * 1024 * 1024, default: 1024 * 1024, description: 'bytes' }),
        ),
      },
      strict,
    ),
  },
  number: {
    input: true,
    options: false,
    uniqueAllowed: true,
    defaultValue: 'number',
    attributes: Type.Object(
      {
        placeholder: Type.Optional(placeholder),
        min: Type.Optional(Type.Number()),
        max: Type.Optional(Type.Number()),
        decimals: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
      },
      strict,
    ),
    check: minMax('min', 'max'),
  },
  select: {
    input: true,
    options: true,
    uniqueAllowed: true,
    defaultValue: 'option',
    attributes: Type.Object({ placeholder: Type.Optional(placeholder) }, strict),
  },
  radio: {
    input: true,
    options: true,
    uniqueAllowed: true,
    defaultValue: 'option',
    attributes: Type.Object({ layout: Type.Optional(layout) }, strict),
  },
  checkbox: {
    input: true,
    options: true,
    uniqueAllowed: false,
    defaultValue: 'options',
    attributes: Type.Object(
      {
        layout: Type.Optional(layout),
        minSelected: Type.Optional(Type.Integer({ minimum: 0, maximum: 500 })),
        maxSelected: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
      },
      strict,
    ),
    check: minMax('minSelected', 'maxSelected'),
  },
  matrix: {
    input: true,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object(
      {
        rows: Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
          minItems: 1,
          maxItems: 50,
          uniqueItems: true,
        }),
        columns: Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
          minItems: 1,
          maxItems: 20,
          uniqueItems: true,
        }),
        multiple: Type.Optional(Type.Boolean({ description: 'several columns may be chosen per row' })),
      },
      strict,
    ),
  },
  richtext: {
    input: false,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object({ html: Type.Optional(html) }, strict),
  },
  embed: {
    input: false,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object({ html: Type.Optional(html) }, strict),
  },
  product: {
    input: true,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object(
      {
        price: Type.Number({ minimum: 0, maximum: 1e9 }),
        currency: Type.Optional(Type.String({ pattern: '^[A-Z]{3}$', default: 'USD', description: 'ISO 4217' })),
        minQuantity: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
        maxQuantity: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
      },
      strict,
    ),
    check: minMax('minQuantity', 'maxQuantity'),
  },
  section: {
    input: false,
    options: false,
    uniqueAllowed: false,
    defaultValue: 'none',
    attributes: Type.Object({ text: Type.Optional(Type.String({ maxLength: 10_000 })) }, strict),
  },
};

export const LOGIC_CONDITIONS = [
  'equals',
  'notequals',
  'contains',
  'notcontains',
  'greaterthan',
  'lessthan',
  'empty',
  'notempty',
] as const;
