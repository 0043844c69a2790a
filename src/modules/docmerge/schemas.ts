import { Type, type Static } from '@sinclair/typebox';
import { Id, PageNumber, PageSize, StringEnum, Timestamp, listBody } from '../../http/schemas.js';
import { FieldLogic } from '../fields/schemas.js';

/** The largest template accepted, in bytes (before base64), by fileKey. */
export const MAX_TEMPLATE_BYTES = 5 * 1024 * 1024;
/** Base64 characters of an inline template: it must fit in the default BODY_LIMIT (1 MiB) with the rest of the body. */
export const MAX_INLINE_TEMPLATE_CHARS = 1_000_000;
/** Integrations one form may hold. */
export const MAX_INTEGRATIONS_PER_FORM = 20;

const TemplateInput = Type.Object(
  {
    filename: Type.String({
      minLength: 1,
      maxLength: 200,
      pattern: '\\.(?:[dD][oO][cC][xX]|[pP][dD][fF])$',
      description: 'Ends in .docx (a Word document with {merge tags}) or .pdf (a PDF with fillable form fields)',
    }),
    content: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_INLINE_TEMPLATE_CHARS,
        description:
          `The template's bytes in base64 (at most ${MAX_INLINE_TEMPLATE_CHARS} characters, within BODY_LIMIT); ` +
          `give this or fileKey, which takes templates up to ${MAX_TEMPLATE_BYTES} bytes`,
      }),
    ),
    fileKey: Type.Optional(
      Type.String({
        maxLength: 64,
        description:
          "A fileKey of this form's upload flow (POST /forms/{formId}/fields/{fieldId}/upload-urls), uploaded and " +
          'not yet used by a submission; give this or content',
      }),
    ),
  },
  { additionalProperties: false, description: 'The template, inline or as an uploaded file' },
);

const Mapping = Type.Record(Type.String({ minLength: 1, maxLength: 200 }), Type.Union([Id, Type.Null()]), {
  description:
    'Merge tag (DOCX) or PDF field name → id of a field of this form; null leaves it empty. A tag not mapped merges ' +
    'the field whose label it is (ignoring case), the field whose id it is (12 or field_12), or one of the built-in ' +
    'tags submission_id, form_id, form_name, timestamp and date',
});

const fileName = Type.String({
  minLength: 1,
  maxLength: 200,
  description:
    'The name of each document, with {merge tags}; the extension is added. Default "{form_name} {submission_id}"',
});

const logic = Type.Union([FieldLogic, Type.Null()], {
  description:
    'Makes the document only when (show) or unless (hide) all or any checks on field values hold, as field logic ' +
    'does; null makes it for every submission',
});

const Email = Type.Object(
  {
    to: Type.Array(Type.String({ format: 'email', maxLength: 254 }), { minItems: 1, maxItems: 10, uniqueItems: true }),
    subject: Type.Optional(Type.String({ minLength: 1, maxLength: 300, description: 'With {merge tags}' })),
  },
  { additionalProperties: false },
);
const email = Type.Union([Email, Type.Null()], {
  description:
    'Also emails each document to these addresses (through SMTP_URL, or into the mail log); null emails none. ' +
    "An encrypted form's documents are not attached: the email says where to download them",
});

export const DocmergeCreate = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "Default: the template's filename" })),
    template: TemplateInput,
    mapping: Type.Optional(Mapping),
    fileName: Type.Optional(fileName),
    logic: Type.Optional(logic),
    email: Type.Optional(email),
    active: Type.Optional(Type.Boolean({ default: true, description: 'false: makes no documents until turned on' })),
    flatten: Type.Optional(
      Type.Boolean({
        default: true,
        description: 'PDF templates: true draws the filled fields into the page; false keeps them fillable',
      }),
    ),
  },
  { additionalProperties: false, title: 'DocmergeCreate' },
);
export type DocmergeCreate = Static<typeof DocmergeCreate>;

export const DocmergeUpdate = Type.Partial(DocmergeCreate, {
  additionalProperties: false,
  minProperties: 1,
  title: 'DocmergeUpdate',
  description: 'Only the properties sent change; a new template is checked against the mapping as on create',
});
export type DocmergeUpdate = Static<typeof DocmergeUpdate>;

export const Docmerge = Type.Object(
  {
    id: Id,
    formId: Id,
    kind: Type.Literal('docmerge'),
    name: Type.String(),
    template: Type.Object({
      kind: StringEnum(['docx', 'pdf']),
      filename: Type.String(),
      size: Type.Integer({ description: 'Bytes' }),
    }),
    tags: Type.Array(Type.String(), { description: "The template's top-level merge tags, or its PDF field names" }),
    mapping: Type.Record(Type.String(), Type.Union([Id, Type.Null()]), {
      description: 'Every tag of the template and what it merges: a field id, or null (a built-in tag, or left empty)',
    }),
    fileName: Type.String(),
    logic: Type.Union([FieldLogic, Type.Null()]),
    email: Type.Union([Email, Type.Null()]),
    active: Type.Boolean(),
    flatten: Type.Boolean(),
    created: Timestamp,
    updated: Timestamp,
  },
  { $id: 'Docmerge', title: 'Docmerge' },
);
export type Docmerge = Static<typeof Docmerge>;

export const DocmergeList = listBody('integrations', Type.Ref(Docmerge));

export const DocmergeDeleted = Type.Object({ id: Id, deleted: Type.Literal(true) });

export const PreviewBody = Type.Object(
  {
    submissionId: Id,
    template: Type.Optional(TemplateInput),
  },
  {
    additionalProperties: false,
    description:
      'submissionId: the submission of this form whose values are merged. template: another template to merge ' +
      "instead of the integration's, checked as on create, to try a new template before a PUT",
  },
);
export type PreviewBody = Static<typeof PreviewBody>;

export const RunListQuery = Type.Object(
  { pageNumber: PageNumber, pageSize: PageSize },
  { additionalProperties: false },
);
export type RunListQuery = Static<typeof RunListQuery>;

export const DocmergeRun = Type.Object(
  {
    id: Id,
    integrationId: Id,
    submissionId: Id,
    attempt: Type.Integer({ minimum: 1 }),
    time: Timestamp,
    durationMs: Type.Integer(),
    outcome: StringEnum(['made', 'exists', 'skipped', 'failed'], {
      description:
        'made: the document was made; exists: an earlier run had made it; skipped: the conditions did not hold, or ' +
        'the submission is gone; failed: see error',
    }),
    error: Type.Union([Type.String(), Type.Null()]),
    documentId: Type.Union([Id, Type.Null()]),
    nextAttempt: Type.Union([Timestamp, Type.Null()], { description: 'When a failed run is tried again' }),
  },
  { title: 'DocmergeRun' },
);
export type DocmergeRun = Static<typeof DocmergeRun>;

export const DocmergeRunList = listBody('runs', DocmergeRun);

/** A document made from a submission, as its detailed record lists it. */
export const GeneratedDocument = Type.Object(
  {
    id: Id,
    integrationId: Id,
    name: Type.String(),
    contentType: Type.String(),
    size: Type.Integer({ description: 'Bytes' }),
    created: Timestamp,
  },
  { title: 'GeneratedDocument' },
);
export type GeneratedDocument = Static<typeof GeneratedDocument>;
