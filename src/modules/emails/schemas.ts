import { Type, type Static } from '@sinclair/typebox';
import { Id, MAX_ID, PageNumber, PageSize, StringEnum, Timestamp, listBody } from '../../http/schemas.js';
import { FieldLogic, type FieldLogic as FieldLogicValue } from '../fields/schemas.js';

/** Confirmations plus notifications one form may hold, each kind counted alone. */
export const MAX_EMAILS_PER_FORM = 20;
export const MAX_RECIPIENTS = 50;

export const EMAIL_KINDS = ['confirmation', 'notification'] as const;
export type EmailKind = (typeof EMAIL_KINDS)[number];

const address = Type.String({ format: 'email', maxLength: 254 });
const template = (what: string, max: number, min = 0) =>
  Type.String({
    minLength: min,
    maxLength: max,
    description: `${what}: a Liquid template with the merge tags of docs/emails.md; one that does not parse, or that runs past the limits of a render with no values, is refused with 400 invalid_template`,
  });

// No `default` keywords: the validator would fill them into updates. The service applies defaults on create.
const common = {
  name: Type.String({ minLength: 1, maxLength: 200, description: 'To recognise the email in the list' }),
  senderName: Type.String({
    maxLength: 200,
    // A header's display name: a line break or another control in it is never meant (nodemailer
    // would encode it, not end the header, but the name would show broken).
    pattern: '^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$',
    description:
      "The From name; the address is the service's MAIL_FROM. Empty takes MAIL_FROM's name. No control characters or line separators",
  }),
  replyTo: Type.Union([address, Type.Null()], { description: 'Reply-To address; null for none' }),
  subject: template('Subject line', 1000, 1),
  message: template('Body', 100_000),
  format: StringEnum(['html', 'text'], {
    description: 'html: the message is HTML, merged values are escaped, and a text part goes with it; default html',
  }),
  logic: Type.Union([FieldLogic, Type.Null()], {
    description:
      'Sends the email only when (show) or unless (hide) all or any checks on field values hold, as field logic does; null sends it on every submission',
  }),
  attachFiles: Type.Boolean({
    description: "Attach the submission's uploaded files, up to MAIL_ATTACHMENT_MAX_BYTES in all; default false",
  }),
};

const recipientField = Type.Integer({
  minimum: 1,
  maximum: MAX_ID,
  description: 'The email field whose value is the address to send to (the respondent)',
});

const notificationOnly = {
  recipients: Type.Array(address, {
    minItems: 1,
    maxItems: MAX_RECIPIENTS,
    description: 'Addresses to send to; one given twice, in any case, is kept once (its first spelling)',
  }),
  replyToField: Type.Union([Id, Type.Null()], {
    description: "An email field whose value becomes the Reply-To (the respondent's address) when it holds one",
  }),
};

const { subject, message, ...commonOptional } = common;
const strict = (title: string) => ({ additionalProperties: false, title }) as const;

export const ConfirmationCreate = Type.Composite(
  [Type.Object({ subject, message, recipientField }), Type.Partial(Type.Object(commonOptional))],
  strict('ConfirmationCreate'),
);
export const NotificationCreate = Type.Composite(
  [
    Type.Object({ subject, message, recipients: notificationOnly.recipients }),
    Type.Partial(Type.Object({ ...commonOptional, replyToField: notificationOnly.replyToField })),
  ],
  strict('NotificationCreate'),
);

const updateOptions = (title: string) =>
  ({ additionalProperties: false, minProperties: 1, title, description: 'Only the properties sent change' }) as const;
export const ConfirmationUpdate = Type.Partial(
  Type.Object({ ...common, recipientField }),
  updateOptions('ConfirmationUpdate'),
);
export const NotificationUpdate = Type.Partial(
  Type.Object({ ...common, ...notificationOnly }),
  updateOptions('NotificationUpdate'),
);

/** Everything a create or update may carry, of either kind. */
export interface EmailInput {
  name?: string;
  senderName?: string;
  replyTo?: string | null;
  subject?: string;
  message?: string;
  format?: 'html' | 'text';
  logic?: FieldLogicValue | null;
  attachFiles?: boolean;
  recipientField?: number | null;
  recipients?: string[];
  replyToField?: number | null;
}

const recordCommon = {
  id: Id,
  formId: Id,
  name: Type.String(),
  senderName: Type.String(),
  replyTo: Type.Union([Type.String(), Type.Null()]),
  subject: Type.String(),
  message: Type.String(),
  format: StringEnum(['html', 'text']),
  logic: Type.Union([FieldLogic, Type.Null()]),
  attachFiles: Type.Boolean(),
  created: Timestamp,
  updated: Timestamp,
};

export const Confirmation = Type.Object(
  { ...recordCommon, recipientField: Id },
  { $id: 'Confirmation', title: 'Confirmation' },
);
export type Confirmation = Static<typeof Confirmation>;

export const Notification = Type.Object(
  {
    ...recordCommon,
    recipients: Type.Array(Type.String()),
    replyToField: Type.Union([Id, Type.Null()]),
  },
  { $id: 'Notification', title: 'Notification' },
);
export type Notification = Static<typeof Notification>;

export const EmailPreview = Type.Object({ id: Id, formId: Id, name: Type.String() });
export type EmailPreview = Static<typeof EmailPreview>;

export const ConfirmationList = listBody('confirmations', Type.Ref(Confirmation));
export const NotificationList = listBody('notifications', Type.Ref(Notification));

export const MailAttachment = Type.Object({
  name: Type.String(),
  size: Type.Integer(),
  contentType: Type.String(),
});

export const MailMessage = Type.Object(
  {
    id: Id,
    formId: Type.Union([Id, Type.Null()], { description: 'null for a portal sign-in link' }),
    emailId: Type.Union([Id, Type.Null()], {
      description: 'The confirmation or notification; null for a resume link or a portal sign-in link',
    }),
    submissionId: Type.Union([Id, Type.Null()], { description: 'null for a resume link or a portal sign-in link' }),
    partialSubmissionId: Type.Union([Id, Type.Null()], {
      description: 'resume_link: the partial submission whose resume link was asked for',
    }),
    portalId: Type.Union([Id, Type.Null()], {
      description: 'portal_signin: the portal whose sign-in link a portal user asked for',
    }),
    kind: StringEnum([...EMAIL_KINDS, 'resume_link', 'portal_signin', 'document'], {
      description:
        'resume_link: a respondent asked the hosted page to email them the link to an unfinished entry; ' +
        'portal_signin: a portal user asked for a link to sign in to a portal page. The links themselves are ' +
        'withheld from the log. document: a document made by a document-merge integration (docs/docmerge.md)',
    }),
    from: Type.String(),
    to: Type.Array(Type.String()),
    replyTo: Type.Union([Type.String(), Type.Null()]),
    subject: Type.String(),
    text: Type.String(),
    html: Type.Union([Type.String(), Type.Null()]),
    attachments: Type.Array(MailAttachment, {
      description: "The files attached: the bytes stay with the submission's files",
    }),
    created: Timestamp,
  },
  { $id: 'MailMessage', title: 'MailMessage' },
);
export type MailMessage = Static<typeof MailMessage>;

export const MailListQuery = Type.Object(
  {
    pageNumber: PageNumber,
    pageSize: PageSize,
  },
  { additionalProperties: false },
);
export type MailListQuery = Static<typeof MailListQuery>;

export const MailList = listBody('messages', Type.Ref(MailMessage));
