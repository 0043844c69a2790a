import { Type, type Static } from '@sinclair/typebox';
import { Id, PageNumber, PageSize, Timestamp, listBody } from '../../http/schemas.js';

/** How many options one bulk call takes. */
export const MAX_BULK_OPTIONS = 10_000;
/** How many options one list holds: a field shows them all, so they stay within what a page can carry. */
export const MAX_OPTIONS_PER_LIST = 50_000;
/**
 * How many options one form shows across all its fields: each field's own options plus, for
 * each field that takes its options from a smart list, that list's options (a list that two
 * fields use counts twice: the page renders it twice). The bound per list alone does not bound
 * a page: the hosted page (GET /f/{viewKey}, public) renders every option of every field, so
 * 20 fields on one full list made an 81 MB page and held the event loop 4-6 s on each view,
 * and 500 fields could show 25 million. One full list's worth per form keeps a page of
 * short labels near 5 MB, rendered in tens of milliseconds (labels and values of the most
 * characters they may have could still make it ten times that: not bounded here). Checked, all or nothing, by every write that can
 * make a live form show more (smartlists/form-options.ts): 400 too_many_options.
 */
export const MAX_OPTIONS_PER_FORM = 50_000;

const name = Type.String({ minLength: 1, maxLength: 200 });
const useImages = Type.Boolean({ description: 'Options may carry an image; default false' });

export const SmartListCreate = Type.Object(
  { name, useImages: Type.Optional(useImages) },
  { additionalProperties: false, title: 'SmartListCreate' },
);
export type SmartListCreate = Static<typeof SmartListCreate>;

export const SmartListUpdate = Type.Object(
  { name: Type.Optional(name), useImages: Type.Optional(useImages) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'SmartListUpdate',
    description: 'Only the properties sent change',
  },
);
export type SmartListUpdate = Static<typeof SmartListUpdate>;

export const SmartList = Type.Object(
  {
    id: Id,
    name: Type.String(),
    useImages: Type.Boolean(),
    optionsCount: Type.Integer({ description: 'Options in the list' }),
    created: Timestamp,
    updated: Timestamp,
  },
  { $id: 'SmartList', title: 'SmartList' },
);
export type SmartList = Static<typeof SmartList>;

export const SmartListQuery = Type.Object(
  {
    pageNumber: PageNumber,
    pageSize: PageSize,
    query: Type.Optional(Type.String({ maxLength: 200, description: 'Part of the list name, case-insensitive' })),
  },
  { additionalProperties: false },
);
export type SmartListQuery = Static<typeof SmartListQuery>;

export const SmartListList = listBody('smartLists', Type.Ref(SmartList));

export const SmartListDeleted = Type.Object({ id: Id }, { description: 'The smart list is gone, with its options' });

const label = Type.String({ minLength: 1, maxLength: 500, description: 'What people see' });
const value = Type.String({
  minLength: 1,
  maxLength: 500,
  description: 'What a submission stores; unique within the list',
});
const order = Type.Integer({
  minimum: 0,
  maximum: 1_000_000,
  description: 'Position in the list (ties by id); appended after the last option when left out',
});

export const OptionCreate = Type.Object(
  { label, value: Type.Optional(value), order: Type.Optional(order) },
  {
    additionalProperties: false,
    title: 'SmartListOptionCreate',
    description: 'value defaults to the label',
  },
);
export type OptionCreate = Static<typeof OptionCreate>;

export const OptionUpdate = Type.Object(
  { label: Type.Optional(label), value: Type.Optional(value), order: Type.Optional(order) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'SmartListOptionUpdate',
    description: 'Only the properties sent change',
  },
);
export type OptionUpdate = Static<typeof OptionUpdate>;

export const SmartListOption = Type.Object(
  {
    id: Id,
    smartListId: Id,
    label: Type.String(),
    value: Type.String(),
    order: Type.Integer(),
    image: Type.Union(
      [
        Type.Object({
          contentType: Type.String({
            description: 'image/png, image/jpeg, image/gif or image/webp, read from its bytes',
          }),
          size: Type.Integer({ description: 'Bytes' }),
        }),
        Type.Null(),
      ],
      { description: 'The option image, when the list uses images and one was uploaded' },
    ),
    created: Timestamp,
    updated: Timestamp,
  },
  { $id: 'SmartListOption', title: 'SmartListOption' },
);
export type SmartListOption = Static<typeof SmartListOption>;

export const OptionQuery = Type.Object(
  {
    pageNumber: PageNumber,
    pageSize: PageSize,
    query: Type.Optional(Type.String({ maxLength: 200, description: 'Part of the option label, case-insensitive' })),
  },
  { additionalProperties: false },
);
export type OptionQuery = Static<typeof OptionQuery>;

export const OptionList = listBody('options', Type.Ref(SmartListOption));

export const BulkOptions = Type.Object(
  {
    options: Type.Array(Type.Object({ label, value: Type.Optional(value) }, { additionalProperties: false }), {
      minItems: 1,
      maxItems: MAX_BULK_OPTIONS,
      description: 'Appended in this order after the last option',
    }),
  },
  { additionalProperties: false, title: 'SmartListBulkOptions' },
);
export type BulkOptions = Static<typeof BulkOptions>;

export const BulkAdded = Type.Object(
  { id: Id, added: Type.Integer({ description: 'Options added' }) },
  { description: 'The id of the smart list, and how many options were added' },
);

export const AllOptionsDeleted = Type.Object(
  { id: Id, deleted: Type.Integer({ description: 'Options removed' }) },
  { description: 'The id of the smart list, which stays, now without options' },
);

export const OptionDeleted = Type.Object({ id: Id }, { description: 'The option is gone' });

export const OptionImageUpload = Type.Object(
  {
    image: Type.Optional(
      Type.Union([Type.String({ format: 'binary' }), Type.Null()], {
        description: 'A PNG, JPEG, GIF or WebP file; empty, null or left out removes the image',
      }),
    ),
  },
  { additionalProperties: false, title: 'SmartListOptionImage' },
);

export const OptionImageDeleted = Type.Object(
  { id: Id },
  { description: 'The id of the option, which now has no image' },
);
