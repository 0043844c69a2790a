import { Type, type Static } from '@sinclair/typebox';
import { Id, PageNumber, PageSize, Timestamp, listBody } from '../../http/schemas.js';
import { Form } from '../forms/schemas.js';
import { ThemeId } from '../themes/schemas.js';

export const SubaccountCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    email: Type.String({ format: 'email', maxLength: 254, description: "The subaccount owner's email" }),
    password: Type.Optional(
      Type.String({
        minLength: 8,
        maxLength: 1024,
        writeOnly: true,
        description: "Write-only: the subaccount owner's password for signing in (OAuth); never returned",
      }),
    ),
  },
  { additionalProperties: false, title: 'SubaccountCreate' },
);
export type SubaccountCreate = Static<typeof SubaccountCreate>;

export const Subaccount = Type.Object(
  {
    id: Id,
    name: Type.String(),
    owner: Type.Object({ id: Id, email: Type.String(), name: Type.String() }),
    formsCount: Type.Integer({ description: 'Live forms of the subaccount' }),
    created: Timestamp,
  },
  { $id: 'Subaccount', title: 'Subaccount' },
);
export type Subaccount = Static<typeof Subaccount>;

export const PageQuery = Type.Object({ pageNumber: PageNumber, pageSize: PageSize }, { additionalProperties: false });
export type PageQuery = Static<typeof PageQuery>;

export const SubaccountList = listBody('subaccounts', Type.Ref(Subaccount));

export const subaccountParams = Type.Object({ subaccountId: Id }, { additionalProperties: false });
export const subaccountFormParams = Type.Object({ subaccountId: Id, formId: Id }, { additionalProperties: false });
export const subaccountThemeParams = Type.Object(
  { subaccountId: Id, themeId: ThemeId },
  { additionalProperties: false },
);

export const FormCopyQuery = Type.Object(
  {
    withIntegrations: Type.Boolean({
      default: false,
      description: 'Copy the webhooks too, each with a new signing secret',
    }),
  },
  { additionalProperties: false },
);
export type FormCopyQuery = Static<typeof FormCopyQuery>;

export const ThemeAssignment = Type.Object(
  { themeId: ThemeId },
  { additionalProperties: false, title: 'ThemeAssignment', description: 'A theme of the subaccount' },
);
export type ThemeAssignment = Static<typeof ThemeAssignment>;

export const ThemeAssigned = Type.Object(
  { formId: Id, themeId: ThemeId },
  { title: 'ThemeAssigned', description: 'The form of the subaccount now uses the theme' },
);

export const ThemeCopied = Type.Object(
  { themeId: ThemeId },
  { title: 'ThemeCopied', description: 'The id of the copy, a theme of the subaccount' },
);

export const FormsUsingTheme = listBody('forms', Type.Ref(Form));
