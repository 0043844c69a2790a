import { Type, type Static } from '@sinclair/typebox';
import type { FormRow } from '../../db/schema.js';
import { Flag, Id, StringEnum, PageNumber, PageSize, Timestamp, listBody } from '../../http/schemas.js';
import { Field, FieldCreate, MAX_FIELDS_PER_FORM } from '../fields/schemas.js';
import { THEME_ID_PATTERN } from '../themes/schemas.js';

export const FormSettings = Type.Object(
  {
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    language: Type.Optional(
      Type.String({ pattern: '^[a-z]{2}(-[A-Z]{2})?$', description: 'BCP 47 language, such as en or pt-BR' }),
    ),
    timezone: Type.Optional(Type.String({ maxLength: 64, description: 'IANA time zone, such as America/New_York' })),
    labelPosition: Type.Optional(StringEnum(['top', 'left', 'right'])),
    successMessage: Type.Optional(Type.String({ maxLength: 10_000 })),
    redirectUrl: Type.Optional(Type.String({ format: 'uri', maxLength: 2000, pattern: '^https?://' })),
    closedMessage: Type.Optional(Type.String({ maxLength: 10_000 })),
    submissionLimit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100_000_000, description: 'The form closes after this many submissions' }),
    ),
    saveAndResume: Type.Optional(Type.Boolean({ description: 'Keep unfinished entries as partial submissions' })),
  },
  { additionalProperties: false, title: 'FormSettings' },
);
export type FormSettings = Static<typeof FormSettings>;

/** A form row's settings column, read (the one place it is parsed). */
export function settingsOf(form: Pick<FormRow, 'settings'>): FormSettings {
  return JSON.parse(form.settings) as FormSettings;
}

const name = Type.String({ minLength: 1, maxLength: 200 });
const folder = Type.Union([Id, Type.Null()], { description: 'Folder id; null for the top level' });
const submitButtonTitle = Type.String({ minLength: 1, maxLength: 100 });
const inactive = Type.Boolean({ description: 'An inactive form takes no submissions' });
const themeId = Type.String({
  pattern: THEME_ID_PATTERN,
  maxLength: 19,
  description:
    "The theme of the form's hosted page, one of the account's (400 invalid_theme otherwise); new forms take the default theme",
});
const password = (description: string) => Type.String({ minLength: 8, maxLength: 1024, writeOnly: true, description });
const encryption = {
  isEncrypted: Type.Optional(
    Type.Boolean({
      description:
        'Submission data and files of an encrypted form are stored sealed (AES-256-GCM) and read only with the password, sent in the ' +
        'X-Formwork-Encryption-Password header. Turning it on or off converts existing submissions in the background (encryptionState).',
    }),
  ),
  encryptionPassword: Type.Optional(
    password(
      'Write-only. Turning encryption on: the new password. Turning it off or changing it: the current password, which is also checked ' +
        '(401 when wrong) when it is sent to an encrypted form without a change. A new password may not start or end with white space ' +
        'or hold control characters (the password header could not carry it); the header carries other characters as UTF-8. Never returned.',
    ),
  ),
};

export const FormCreate = Type.Object(
  {
    name,
    folder: Type.Optional(folder),
    submitButtonTitle: Type.Optional(submitButtonTitle),
    inactive: Type.Optional(inactive),
    themeId: Type.Optional(themeId),
    ...encryption,
    settings: Type.Optional(FormSettings),
    fields: Type.Optional(
      Type.Array(FieldCreate, {
        maxItems: MAX_FIELDS_PER_FORM,
        description:
          'Fields created with the form, in order. Logic that refers to other fields is added afterwards, once they have ids.',
      }),
    ),
  },
  { additionalProperties: false, title: 'FormCreate' },
);
export type FormCreate = Static<typeof FormCreate>;

export const FormUpdate = Type.Object(
  {
    name: Type.Optional(name),
    folder: Type.Optional(folder),
    submitButtonTitle: Type.Optional(submitButtonTitle),
    inactive: Type.Optional(inactive),
    themeId: Type.Optional(themeId),
    ...encryption,
    newEncryptionPassword: Type.Optional(
      password(
        'Write-only. Changes the password of an encrypted form (with encryptionPassword, the current one); no data is rewritten.',
      ),
    ),
    settings: Type.Optional(Type.Union([FormSettings], { description: 'Replaces the settings as a whole' })),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'FormUpdate',
    description: 'Only the properties sent change',
  },
);
export type FormUpdate = Static<typeof FormUpdate>;

export const Form = Type.Object(
  {
    id: Id,
    name: Type.String(),
    created: Timestamp,
    updated: Timestamp,
    folder: Type.Union([Id, Type.Null()]),
    url: Type.String({ description: 'Address of the hosted form' }),
    viewKey: Type.String(),
    isEncrypted: Type.Boolean(),
    encryptionState: Type.Union([StringEnum(['encrypting', 'decrypting']), Type.Null()], {
      description:
        'While existing submissions are being sealed or opened after encryption was turned on or off; null otherwise',
    }),
    inactive: Type.Boolean(),
    submissionsCount: Type.Integer(),
    submitButtonTitle: Type.String(),
    themeId: Type.Union([Type.String(), Type.Null()], {
      description: "The theme of the hosted page (docs/themes.md); null means the account's default theme",
    }),
    settings: FormSettings,
    deleted: Type.Optional(
      Type.String({ format: 'date-time', description: 'When the form was deleted; only in listings of deleted forms' }),
    ),
    fields: Type.Optional(Type.Array(Type.Ref(Field))),
  },
  { $id: 'Form', title: 'Form' },
);
export type Form = Static<typeof Form>;

export const FormPreview = Type.Object({
  id: Id,
  name: Type.String(),
  deleted: Type.String({
    format: 'date-time',
    description: 'When the form was deleted; restore it with POST /forms/{formId}/restore',
  }),
});

export const ORDER_BY = ['id', 'name', 'created', 'updated', 'submissionsCount'] as const;

export const FormListQuery = Type.Object(
  {
    pageNumber: PageNumber,
    pageSize: PageSize,
    search: Type.Optional(Type.String({ maxLength: 200, description: 'Part of the form name, case-insensitive' })),
    // No defaults: a listing of deleted forms is ordered by deletion, newest first, unless told otherwise.
    orderBy: Type.Optional(
      StringEnum(ORDER_BY, { description: 'id unless given (for deleted=true: the time of deletion)' }),
    ),
    order: Type.Optional(
      StringEnum(['asc', 'desc', 'ASC', 'DESC'], {
        description: 'asc unless given (for deleted=true without orderBy: desc, newest deletion first)',
      }),
    ),
    folder: Type.Optional(Id),
    deleted: Type.Boolean({
      default: false,
      description: 'true lists the deleted forms instead, newest deletion first unless orderBy is given',
    }),
  },
  { additionalProperties: false },
);
export type FormListQuery = Static<typeof FormListQuery>;

export const FormList = listBody('forms', Type.Ref(Form));

export const WithFieldsQuery = Type.Object({ withFields: Flag }, { additionalProperties: false });

export const CopyQuery = Type.Object(
  {
    includeIntegrations: Type.Boolean({
      default: false,
      description:
        'Copy the webhooks, each with a new signing secret (POST /webhook/{id}/secret shows it), and document merges ' +
        '(once the form has them); a member needs the edit level on the form',
    }),
    includeEmails: Type.Boolean({
      default: false,
      description: 'Copy the confirmation and notification emails; a member needs the edit level on the form',
    }),
    template: Type.Optional(Id),
    folder: Type.Optional(Id),
  },
  { additionalProperties: false },
);
export type CopyQuery = Static<typeof CopyQuery>;
