import { GeneratedDocument } from '../docmerge/schemas.js';
import { Type, type Static } from '@sinclair/typebox';
import { Flag, Id, PageNumber, PageSize, StringEnum, Timestamp, listBody } from '../../http/schemas.js';
import { MAX_FIELDS_PER_FORM } from '../fields/schemas.js';
import { EASTERN_TIME_PATTERN } from './eastern-time.js';

const FieldValueInput = Type.Object(
  {
    id: Type.Union([Id, Type.String({ pattern: '^[1-9][0-9]{0,9}$' })], {
      description: 'Field id, as a number or a string',
    }),
    value: Type.Unknown({
      description:
        '{"value": x} or a bare string or number; {"subvalues": [{"subvalue": x}]} for select and checkbox; the subfields ' +
        '(first, last, …; address, city, …) for name and address; row → column for matrix; {number, expMonth, expYear} for a card. null clears the field.',
    }),
  },
  { additionalProperties: false },
);

export const SubmissionCreate = Type.Object(
  {
    fields: Type.Array(FieldValueInput, { maxItems: MAX_FIELDS_PER_FORM }),
    latitude: Type.Optional(Type.Number({ minimum: -90, maximum: 90 })),
    longitude: Type.Optional(Type.Number({ minimum: -180, maximum: 180 })),
  },
  { additionalProperties: false, title: 'SubmissionCreate' },
);
export type SubmissionCreate = Static<typeof SubmissionCreate>;

export const SubmissionUpdate = Type.Object(
  {
    fields: Type.Array(FieldValueInput, {
      minItems: 1,
      maxItems: MAX_FIELDS_PER_FORM,
      description: 'Only the fields named change',
    }),
  },
  { additionalProperties: false, title: 'SubmissionUpdate' },
);
export type SubmissionUpdate = Static<typeof SubmissionUpdate>;

const value = Type.Unknown({
  description: 'The stored value: a string, a number, a list of option values, or an object of parts',
});
export const SubmissionDataEntry = Type.Object({
  field: Id,
  label: Type.String(),
  type: Type.String(),
  value,
  displayValue: Type.String(),
  parsedValue: value,
});
export type SubmissionDataEntry = Static<typeof SubmissionDataEntry>;

const submissionProperties = {
  id: Id,
  formId: Id,
  timestamp: Timestamp,
  updated: Timestamp,
  userAgent: Type.String(),
  remoteAddr: Type.String(),
  latitude: Type.Union([Type.Number(), Type.Null()]),
  longitude: Type.Union([Type.Number(), Type.Null()]),
};

export const Submission = Type.Object(
  {
    ...submissionProperties,
    prettyName: Type.Union([Type.String(), Type.Null()]),
    data: Type.Array(SubmissionDataEntry),
    documents: Type.Optional(
      Type.Array(GeneratedDocument, {
        description:
          'GET /submissions/{id} only, and only when there are some: the documents that document-merge ' +
          'integrations made from it, each downloaded at /submissions/{id}/documents/{documentId}',
      }),
    ),
  },
  { $id: 'Submission', title: 'Submission' },
);
export type Submission = Static<typeof Submission>;

const LegacyEntry = Type.Object({
  field: Id,
  value,
  label: Type.Optional(Type.String()),
  type: Type.Optional(Type.String()),
  displayValue: Type.Optional(Type.String()),
  parsedValue: Type.Optional(value),
});

export const SubmissionListItem = Type.Object(
  {
    ...submissionProperties,
    prettyName: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    data: Type.Optional(
      Type.Union([Type.Record(Type.String(), LegacyEntry), Type.Array(SubmissionDataEntry)], {
        description: 'legacy: an object keyed by field id; standardized: a list shaped like the detailed submission',
      }),
    ),
  },
  { $id: 'SubmissionListItem', title: 'SubmissionListItem' },
);
export type SubmissionListItem = Static<typeof SubmissionListItem>;

const easternTime = (what: string) =>
  Type.String({
    pattern: EASTERN_TIME_PATTERN,
    description: `${what}: YYYY-MM-DD or YYYY-MM-DD HH:MM:SS in America/New_York, inclusive`,
  });

const SearchCriterion = Type.Object(
  {
    fieldId: Id,
    value: Type.String({
      maxLength: 200,
      description: 'Whole value, any case; end it with * to match values that start with it',
    }),
  },
  { additionalProperties: false },
);

/** Filters shared by the list, the export and the partial-submission list. */
export const submissionFilters = {
  order: StringEnum(['ASC', 'DESC', 'asc', 'desc'], {
    default: 'DESC',
    description: 'By submission time; newest first by default',
  }),
  keyword: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'Words that must all appear in the submission (any field, any case, word prefixes)',
    }),
  ),
  minTime: Type.Optional(easternTime('Created on or after')),
  maxTime: Type.Optional(easternTime('Created on or before')),
  search: Type.Optional(
    Type.Unsafe<Record<string, Static<typeof SearchCriterion>>>({
      type: 'object',
      patternProperties: { '^[0-9]$': SearchCriterion },
      additionalProperties: false,
      description: 'search[n][fieldId] and search[n][value], n from 0 to 9; all criteria must hold',
    }),
  ),
};

export const SubmissionListQuery = Type.Object(
  {
    pageNumber: PageNumber,
    pageSize: PageSize,
    ...submissionFilters,
    data: Flag,
    expandData: Flag,
    prettyName: Flag,
    dataFormat: StringEnum(['legacy', 'standardized'], { default: 'legacy' }),
  },
  { additionalProperties: false },
);
export type SubmissionListQuery = Static<typeof SubmissionListQuery>;
export type SubmissionFilters = Pick<SubmissionListQuery, 'order' | 'keyword' | 'minTime' | 'maxTime' | 'search'>;

export const SubmissionList = listBody('submissions', Type.Ref(SubmissionListItem));

export const ExportQuery = Type.Object(
  { ...submissionFilters, format: StringEnum(['csv', 'ndjson'], { default: 'csv' }) },
  { additionalProperties: false },
);
export type ExportQuery = Static<typeof ExportQuery>;

export const CountQuery = Type.Object(
  {
    startDate: Type.Optional(easternTime('Counts from this time on; with lookbackPeriod, the last day counted')),
    lookbackPeriod: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 7, description: 'Days counted backwards, up to 7' }),
    ),
  },
  { additionalProperties: false },
);
export type CountQuery = Static<typeof CountQuery>;

export const CountRecord = Type.Object({
  formId: Id,
  count: Type.Integer(),
  from: Type.Union([Timestamp, Type.Null()]),
  to: Type.Union([Timestamp, Type.Null()]),
});

export const AccountSearchQuery = Type.Object(
  {
    search: Type.String({ minLength: 1, maxLength: 200, description: 'Words that must all appear' }),
    pageNumber: PageNumber,
    pageSize: PageSize,
  },
  { additionalProperties: false },
);
export type AccountSearchQuery = Static<typeof AccountSearchQuery>;

export const SubmissionDeleted = Type.Object({ id: Id, formId: Id, deleted: Type.Literal(true) });
