import { Type, type Static } from '@sinclair/typebox';
import { Id, PageNumber, PageSize, Timestamp, listBody } from '../../http/schemas.js';

const name = Type.String({ minLength: 1, maxLength: 200, description: 'Shown at the top of the portal page' });
const description = Type.Union([Type.String({ maxLength: 5000 }), Type.Null()], {
  description: 'Shown under the name on the portal page (plain text; blank lines make paragraphs); null for none',
});

export const PortalCreate = Type.Object(
  { name, description: Type.Optional(description) },
  { additionalProperties: false, title: 'PortalCreate' },
);
export type PortalCreate = Static<typeof PortalCreate>;

export const PortalUpdate = Type.Object(
  { name: Type.Optional(name), description: Type.Optional(description) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'PortalUpdate',
    description: 'Only the properties sent change',
  },
);
export type PortalUpdate = Static<typeof PortalUpdate>;

const Avatar = Type.Union(
  [
    Type.Object({
      contentType: Type.String({ description: 'image/png, image/jpeg, image/gif or image/webp, read from its bytes' }),
      size: Type.Integer({ description: 'Bytes' }),
      url: Type.String({ description: 'Where the portal page loads it from (public, cacheable)' }),
    }),
    Type.Null(),
  ],
  { description: 'The avatar shown on the portal page; null for none' },
);

const dueDate = Type.Union([Type.String({ format: 'date-time', maxLength: 40 }), Type.Null()], {
  description: 'ISO 8601 with a time zone (stored and shown in UTC); null for none',
});
const required = Type.Boolean({ description: 'The portal page marks the form as one to fill in; default false' });

export const PortalForm = Type.Object(
  {
    portalId: Id,
    formId: Id,
    name: Type.String({ description: "The form's name" }),
    url: Type.String({ description: "The form's hosted page" }),
    dueDate: Type.Union([Timestamp, Type.Null()]),
    required: Type.Boolean(),
    created: Timestamp,
    updated: Timestamp,
  },
  { $id: 'PortalForm', title: 'PortalForm' },
);
export type PortalForm = Static<typeof PortalForm>;

export const PortalUser = Type.Object(
  {
    id: Id,
    portalId: Id,
    email: Type.String(),
    name: Type.String(),
    lastSignIn: Type.Union([Timestamp, Type.Null()], { description: 'When the user last opened a sign-in link' }),
    created: Timestamp,
    updated: Timestamp,
  },
  { $id: 'PortalUser', title: 'PortalUser' },
);
export type PortalUser = Static<typeof PortalUser>;

const portalProperties = {
  id: Id,
  name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  url: Type.String({ description: 'The portal page, where its users ask for a sign-in link' }),
  avatar: Avatar,
  formsCount: Type.Integer(),
  usersCount: Type.Integer(),
  created: Timestamp,
  updated: Timestamp,
};

export const Portal = Type.Object(portalProperties, { $id: 'Portal', title: 'Portal' });
export type Portal = Static<typeof Portal>;

export const PortalDetails = Type.Object(
  {
    ...portalProperties,
    forms: Type.Array(Type.Ref(PortalForm), { description: 'In the order they were added (live forms only)' }),
    users: Type.Array(Type.Ref(PortalUser), { description: 'By email' }),
  },
  { $id: 'PortalDetails', title: 'PortalDetails' },
);
export type PortalDetails = Static<typeof PortalDetails>;

export const PortalQuery = Type.Object({ pageNumber: PageNumber, pageSize: PageSize }, { additionalProperties: false });
export type PortalQuery = Static<typeof PortalQuery>;

export const PortalList = listBody('portals', Type.Ref(Portal));

export const PortalDeleted = Type.Object(
  { id: Id },
  { description: 'The portal is gone for good, with its forms list, users and their sign-in links and sessions' },
);
export const AvatarDeleted = Type.Object({ id: Id }, { description: 'The id of the portal, which now has no avatar' });

export const AvatarUpload = Type.Object(
  {
    image: Type.Optional(
      Type.Union([Type.String({ format: 'binary' }), Type.Null()], {
        description: 'A PNG, JPEG, GIF or WebP file; empty, null or left out removes the avatar',
      }),
    ),
  },
  { additionalProperties: false, title: 'PortalAvatar' },
);

export const PortalFormCreate = Type.Object(
  { formId: Id, dueDate: Type.Optional(dueDate), required: Type.Optional(required) },
  { additionalProperties: false, title: 'PortalFormCreate' },
);
export type PortalFormCreate = Static<typeof PortalFormCreate>;

export const PortalFormUpdate = Type.Object(
  { dueDate: Type.Optional(dueDate), required: Type.Optional(required) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'PortalFormUpdate',
    description: 'Only the properties sent change',
  },
);
export type PortalFormUpdate = Static<typeof PortalFormUpdate>;

export const PortalFormDeleted = Type.Object(
  { portalId: Id, formId: Id },
  { description: 'The form is no longer in the portal (the form itself stays)' },
);

const email = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'Where sign-in links go; unique in the portal',
});
const userName = Type.String({ minLength: 1, maxLength: 200 });

export const PortalUserCreate = Type.Object(
  { email, name: userName },
  { additionalProperties: false, title: 'PortalUserCreate' },
);
export type PortalUserCreate = Static<typeof PortalUserCreate>;

export const PortalUserUpdate = Type.Object(
  { email: Type.Optional(email), name: Type.Optional(userName) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'PortalUserUpdate',
    description: 'Only the properties sent change. A new email ends the sessions of the old one',
  },
);
export type PortalUserUpdate = Static<typeof PortalUserUpdate>;

export const PortalUserDeleted = Type.Object(
  { portalId: Id, userId: Id },
  { description: 'The user is gone from the portal, with their sign-in links and sessions' },
);
