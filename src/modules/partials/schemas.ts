import { Type, type Static } from '@sinclair/typebox';
import { Id, Timestamp, listBody } from '../../http/schemas.js';

const value = Type.Unknown({ description: 'The stored value, as in a submission' });
const Entry = Type.Object({
  field: Id,
  label: Type.String(),
  type: Type.String(),
  value,
  displayValue: Type.String(),
  parsedValue: value,
});
const LegacyEntry = Type.Object({
  field: Id,
  value,
  label: Type.Optional(Type.String()),
  type: Type.Optional(Type.String()),
  displayValue: Type.Optional(Type.String()),
  parsedValue: Type.Optional(value),
});

const properties = {
  id: Id,
  formId: Id,
  timestamp: Timestamp,
  updated: Timestamp,
  expires: Type.String({ format: 'date-time', description: 'When the partial is removed unless saved again' }),
  userAgent: Type.String(),
  remoteAddr: Type.String(),
};

export const PartialSubmission = Type.Object(
  { ...properties, prettyName: Type.Union([Type.String(), Type.Null()]), data: Type.Array(Entry) },
  { title: 'PartialSubmission' },
);
export type PartialSubmission = Static<typeof PartialSubmission>;

export const PartialListItem = Type.Object(
  {
    ...properties,
    prettyName: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    data: Type.Optional(Type.Union([Type.Record(Type.String(), LegacyEntry), Type.Array(Entry)])),
  },
  { title: 'PartialSubmissionListItem' },
);
export type PartialListItem = Static<typeof PartialListItem>;

export const PartialList = listBody('partialSubmissions', PartialListItem);

export const PartialDeleted = Type.Object({ id: Id });
