import { randomBytes } from 'node:crypto';
import { makeDocx } from './docmerge-templates.js';

type Ids = Record<string, number | string>;

/** A DOCX template with only built-in tags: valid on any form. */
export const MATRIX_TEMPLATE = makeDocx(['Matrix document {submission_id} of {form_name}']).toString('base64');

/**
 * A body each operation accepts. Kept minimal and free of ids so that it is valid for any
 * account; the cross-account matrix adds foreign ids to it where the body can hold one.
 */
export const VALID_BODIES: Record<string, (ids: Ids) => Record<string, unknown>> = {
  'POST /forms': () => ({ name: 'Matrix form' }),
  'PUT /forms/{formId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /forms/{formId}/fields': () => ({ type: 'text', label: 'Matrix field' }),
  'PUT /forms/{formId}/fields/{fieldId}': () => ({ label: 'Relabelled by the matrix' }),
  'POST /folders': () => ({ name: 'Matrix folder' }),
  'PUT /folders/{folderId}': () => ({ name: 'Renamed by the matrix' }),
  // Field ids sit inside the fields list, not in an id-valued property: the field of the
  // account whose ids are given (a file field, which takes this inline upload; a text field
  // takes it as text).
  'POST /forms/{formId}/submissions': (ids) => ({ fields: [{ id: ids.fieldId, value: 'note.txt;aGVsbG8=' }] }),
  'PUT /submissions/{submissionId}': (ids) => ({ fields: [{ id: ids.fieldId, value: 'note.txt;aGVsbG8=' }] }),
  'POST /forms/{formId}/fields/{fieldId}/upload-urls': () => ({ filenames: ['matrix.txt'] }),
  // An empty value: nothing to prefill in any field type (a file field takes no other), so 200 everywhere.
  'POST /forms/{formId}/prefill': (ids) => ({ fields: [{ id: ids.fieldId, value: '' }] }),
  // Emails are unique per account: every body gets a new one.
  'POST /users': () => ({
    email: `matrix-${randomBytes(6).toString('hex')}@example.com`,
    name: 'Matrix user',
    role: 'member',
  }),
  'PUT /users/{userId}': () => ({ name: 'Renamed by the matrix' }),
  'PUT /users/{userId}/permissions/{formId}': () => ({ level: 'view' }),
  'POST /oauth-clients': () => ({ name: 'Matrix app', redirectUris: ['https://example.com/callback'] }),
  'POST /tokens': () => ({ name: 'Matrix token' }),
  'POST /users/{userId}/tokens': () => ({ name: 'Matrix token' }),
  'PUT /oauth-clients/{clientId}': () => ({ name: 'Matrix app, renamed', requirePkce: false }),
  'POST /form/{formId}/webhook': () => ({ url: 'https://example.com/matrix-hook', hmacSecret: 'matrix secret' }),
  'PUT /webhook/{webhookId}': () => ({ url: 'https://example.com/matrix-hook-2' }),
  'POST /forms/{formId}/integrations/docmerge': () => ({
    template: { filename: 'matrix.docx', content: MATRIX_TEMPLATE },
  }),
  'PUT /forms/{formId}/integrations/{integrationId}': () => ({ name: 'Renamed by the matrix' }),
  // A submission of the form of the account whose ids are given.
  'POST /forms/{formId}/integrations/{integrationId}/preview': (ids) => ({
    submissionId: ids.submissionId,
    template: { filename: 'other.docx', content: MATRIX_TEMPLATE },
  }),
  // A confirmation goes to an email field of the form: the fixtures' emailFieldId.
  'POST /forms/{formId}/confirmations': (ids) => ({
    subject: 'Thanks, {{ field_1 }}',
    message: '<p>We got it.</p>{{ all_fields }}',
    recipientField: ids.emailFieldId,
  }),
  'PUT /confirmations/{confirmationId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /forms/{formId}/notifications': () => ({
    subject: 'New submission {{ submission_id }}',
    message: '{{ all_fields }}',
    recipients: ['team@example.com'],
  }),
  'PUT /notifications/{notificationId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /smartlists': () => ({ name: 'Matrix list' }),
  'PUT /smartlists/{smartListId}': () => ({ name: 'Renamed by the matrix' }),
  // Values are unique within a list: every body brings new ones.
  'POST /smartlists/{smartListId}/options': () => ({
    label: 'Matrix option',
    value: `m-${randomBytes(6).toString('hex')}`,
  }),
  'PUT /smartlists/{smartListId}/options/{optionId}': () => ({ label: 'Relabelled by the matrix' }),
  'POST /smartlists/{smartListId}/bulkoptions': () => ({
    options: [
      { label: 'Matrix one', value: `m-${randomBytes(6).toString('hex')}` },
      { label: 'Matrix two', value: `m-${randomBytes(6).toString('hex')}` },
    ],
  }),
  'POST /themes': () => ({
    name: 'Matrix theme',
    colors: { primary: '#336699' },
    customCss: '.fw-title { color: #333 }',
  }),
  'PUT /themes/{themeId}': () => ({ name: 'Renamed by the matrix' }),
  // Owner emails are unique per account, and each subaccount is an account of its own: a new one anyway.
  'POST /subaccount': () => ({
    name: 'Matrix subaccount',
    email: `matrix-sub-${randomBytes(6).toString('hex')}@example.com`,
  }),
  // A theme of the subaccount (the fixtures' subThemeId) for a form of it.
  'PUT /subaccount/{subaccountId}/forms/{formId}/theme': (ids) => ({ themeId: ids.subThemeId }),
  'POST /portal': () => ({ name: 'Matrix portal' }),
  'PUT /portal/{portalId}': () => ({ name: 'Renamed by the matrix' }),
  // The form of the account whose ids are given (the permission matrix's portal does not hold it yet).
  'POST /portal/{portalId}/form': (ids) => ({ formId: ids.formId, dueDate: '2030-01-01T00:00:00Z', required: true }),
  'PUT /portal/{portalId}/form/{formId}': () => ({ dueDate: '2030-01-01T00:00:00Z' }),
  // Emails are unique per portal: every body gets a new one.
  'POST /portal/{portalId}/user': () => ({
    email: `portal-${randomBytes(6).toString('hex')}@example.com`,
    name: 'Matrix portal user',
  }),
  'PUT /portal/{portalId}/user/{userId}': () => ({ name: 'Renamed by the matrix' }),
  // The original service's v2 operations (docs/v2.md), with their snake_case names, sent as JSON here.
  'POST /api/v2/form': () => ({ name: 'Matrix form', db: '1' }),
  'PUT /api/v2/form/{formId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /api/v2/form/{formId}/copy': () => ({ folder: '0' }),
  'POST /api/v2/form/{formId}/field': () => ({ field_type: 'text', label: 'Matrix field' }),
  'PUT /api/v2/field/{fieldId}': () => ({ label: 'Relabelled by the matrix' }),
  'POST /api/v2/form/{formId}/submission': (ids) => ({ [`field_${ids.fieldId}`]: 'note.txt;aGVsbG8=' }),
  'PUT /api/v2/submission/{submissionId}': (ids) => ({ [`field_${ids.fieldId}`]: 'note.txt;aGVsbG8=' }),
  'POST /api/v2/folder': () => ({ name: 'Matrix folder', parent: '0' }),
  'PUT /api/v2/folder/{folderId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /api/v2/form/{formId}/webhook': () => ({
    url: 'https://example.com/matrix-hook',
    hmac_secret: 'matrix secret',
  }),
  'PUT /api/v2/webhook/{webhookId}': () => ({ url: 'https://example.com/matrix-hook-2' }),
  'POST /api/v2/form/{formId}/confirmation': (ids) => ({
    subject: 'Thanks',
    message: '<p>We got it.</p>',
    recipient_field: ids.emailFieldId,
  }),
  'PUT /api/v2/confirmation/{confirmationId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /api/v2/form/{formId}/notification': () => ({
    subject: 'New submission',
    message: '{{ all_fields }}',
    recipients: ['team@example.com'],
  }),
  'PUT /api/v2/notification/{notificationId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /api/v2/portal': () => ({ name: 'Matrix portal' }),
  'PUT /api/v2/portal/{portalId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /api/v2/portal/{portalId}/form': (ids) => ({ form_id: ids.formId, required: '1' }),
  'PUT /api/v2/portal/{portalId}/form/{formId}': () => ({ due_date: '2030-01-01T00:00:00Z' }),
  'POST /api/v2/portal/{portalId}/user': () => ({
    email: `portal-${randomBytes(6).toString('hex')}@example.com`,
    name: 'Matrix portal user',
  }),
  'PUT /api/v2/portal/{portalId}/user/{userId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /api/v2/smartlist': () => ({ name: 'Matrix list' }),
  'PUT /api/v2/smartlist/{smartListId}': () => ({ name: 'Renamed by the matrix' }),
  'POST /api/v2/smartlist/{smartListId}/option': () => ({
    label: 'Matrix option',
    value: `m-${randomBytes(6).toString('hex')}`,
  }),
  'PUT /api/v2/smartlist/{smartListId}/option/{optionId}': () => ({ label: 'Relabelled by the matrix' }),
  'POST /api/v2/smartlist/{smartListId}/bulkoptions': () => ({
    options: [{ label: 'Matrix one', value: `m-${randomBytes(6).toString('hex')}` }],
  }),
};
