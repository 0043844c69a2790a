import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Id, PageNumber, PageSize, Timestamp, listBody } from '../../http/schemas.js';

export const MAX_FOLDER_DEPTH = 5;

const name = Type.String({ minLength: 1, maxLength: 200 });
const parent = Type.Union([Id, Type.Null()], {
  description: `Parent folder id, or null for the top level; folders nest ${MAX_FOLDER_DEPTH} deep at most`,
});

export const FolderCreate = Type.Object(
  { name, parent: Type.Optional(parent) },
  { additionalProperties: false, title: 'FolderCreate' },
);
export type FolderCreate = Static<typeof FolderCreate>;

export const FolderUpdate = Type.Object(
  { name: Type.Optional(name), parent: Type.Optional(parent) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'FolderUpdate',
    description: 'Only the properties sent change',
  },
);
export type FolderUpdate = Static<typeof FolderUpdate>;

const folderProperties = {
  id: Id,
  name: Type.String(),
  parent: Type.Union([Id, Type.Null()]),
  formsCount: Type.Integer({
    description: 'Live forms directly in this folder; for a member, only those the member holds a level on',
  }),
  created: Timestamp,
  updated: Timestamp,
};

// Written out level by level rather than as a recursive schema: the depth is bounded, and
// both the serializer and the OpenAPI document handle plain nesting best.
function nested(depth: number): TSchema {
  const subfolders = depth > 1 ? Type.Array(nested(depth - 1)) : Type.Array(Type.Never(), { maxItems: 0 });
  return Type.Object({ ...folderProperties, subfolders });
}
export const Folder = Type.Object(
  {
    ...folderProperties,
    subfolders: Type.Array(nested(MAX_FOLDER_DEPTH - 1), { description: 'Subfolders, each with its own' }),
  },
  { $id: 'Folder', title: 'Folder' },
);
export interface Folder {
  id: number;
  name: string;
  parent: number | null;
  formsCount: number;
  created: string;
  updated: string;
  subfolders: Folder[];
}

export const FolderListQuery = Type.Object(
  {
    page: PageNumber,
    perPage: Type.Integer({ minimum: 10, maximum: 100, default: 25 }),
  },
  { additionalProperties: false },
);
export type FolderListQuery = Static<typeof FolderListQuery>;

/**
 * The folder list as the original service's v2 API pages it (`/api/v2/folder`): per_page from
 * 1, as every other list takes, where the v2025 route's perPage starts at 10.
 */
export const V2FolderListQuery = Type.Object({ page: PageNumber, perPage: PageSize }, { additionalProperties: false });

export const FolderList = listBody('folders', Type.Ref(Folder));

export const FolderDeleted = Type.Object(
  { id: Id },
  { description: 'The folder is gone; its forms and subfolders moved up to its parent (or the top level)' },
);
