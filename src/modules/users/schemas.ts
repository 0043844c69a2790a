import { Type, type Static } from '@sinclair/typebox';
import { Id, StringEnum, Timestamp } from '../../http/schemas.js';
import { LEVELS } from '../permissions/levels.js';

const email = Type.String({ format: 'email', maxLength: 254 });
const name = Type.String({ minLength: 1, maxLength: 200 });
const password = Type.String({
  minLength: 8,
  maxLength: 200,
  writeOnly: true,
  description: 'Write-only; at least 8 characters. Needed to sign in to authorize applications.',
});
const AssignableRole = StringEnum(['admin', 'member'] as const, {
  description: 'The owner role belongs to the user who made the account and cannot be given',
});

export const User = Type.Object(
  {
    id: Id,
    email: Type.String(),
    name: Type.String(),
    role: StringEnum(['owner', 'admin', 'member'] as const),
    canSignIn: Type.Boolean({ description: 'Whether a password is set' }),
    created: Timestamp,
  },
  { $id: 'User', title: 'User' },
);
export type User = Static<typeof User>;

export const UserList = Type.Object({ users: Type.Array(Type.Ref(User)) });

export const UserCreate = Type.Object(
  { email, name, role: AssignableRole, password: Type.Optional(password) },
  { additionalProperties: false, title: 'UserCreate' },
);
export type UserCreate = Static<typeof UserCreate>;

export const UserUpdate = Type.Object(
  { name: Type.Optional(name), role: Type.Optional(AssignableRole), password: Type.Optional(password) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'UserUpdate',
    description: 'Only the properties sent change',
  },
);
export type UserUpdate = Static<typeof UserUpdate>;

export const UserDeleted = Type.Object({ id: Id, deleted: Type.Literal(true) });

export const Level = StringEnum(LEVELS, {
  description:
    'view: read the form and its submissions; submissions: also create, edit and delete submissions; edit: also change the form and its fields; full: also delete or restore the form',
});

export const FormPermission = Type.Object({ formId: Id, level: Level, updated: Timestamp });
export type FormPermission = Static<typeof FormPermission>;
export const FormPermissionList = Type.Object({ userId: Id, permissions: Type.Array(FormPermission) });
export const FormPermissionSet = Type.Object(
  { level: Level },
  { additionalProperties: false, title: 'FormPermissionSet' },
);
export const FormPermissionDeleted = Type.Object({ userId: Id, formId: Id, deleted: Type.Literal(true) });
