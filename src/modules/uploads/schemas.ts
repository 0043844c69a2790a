import { Type, type Static } from '@sinclair/typebox';
import { Id, Timestamp } from '../../http/schemas.js';

export const UploadUrlsRequest = Type.Object(
  {
    filenames: Type.Array(Type.String({ maxLength: 1000 }), {
      minItems: 1,
      maxItems: 20,
      description: "The names of the files to upload, at most the field's maxFiles (a signature field takes one)",
    }),
  },
  { additionalProperties: false, title: 'UploadUrlsRequest' },
);
export type UploadUrlsRequest = Static<typeof UploadUrlsRequest>;

export const UploadUrl = Type.Object({
  filename: Type.String(),
  fileKey: Type.String({ description: "What to send as the field's subvalue once the file is uploaded" }),
  uploadUrl: Type.String({ description: "PUT the file's bytes here, once, before expiresAt" }),
  expiresAt: Timestamp,
});

export const UploadUrls = Type.Object({ uploads: Type.Array(UploadUrl) });
export type UploadUrls = Static<typeof UploadUrls>;

export const UploadQuery = Type.Object(
  {
    fieldId: Id,
    index: Type.Integer({
      minimum: 0,
      maximum: 100,
      default: 0,
      description: 'Zero-based position of the file when the field holds several',
    }),
  },
  { additionalProperties: false },
);
export type UploadQuery = Static<typeof UploadQuery>;

export const ServiceUploadQuery = Type.Object(
  { expires: Type.Integer({ minimum: 0 }), signature: Type.String({ maxLength: 100 }) },
  { additionalProperties: false },
);
export type ServiceUploadQuery = Static<typeof ServiceUploadQuery>;

export const ServiceUploadDone = Type.Object({ fileKey: Type.String(), size: Type.Integer() });
