import { Type, type Static } from '@sinclair/typebox';
import { SCOPES } from '../../http/access.js';
import { Id, StringEnum, Timestamp } from '../../http/schemas.js';

/** Longest lifetime a token can be given: ten years. */
export const MAX_TOKEN_DAYS = 3650;

const Scope = StringEnum(SCOPES);

export const PersonalToken = Type.Object(
  {
    id: Id,
    userId: Id,
    name: Type.String(),
    prefix: Type.Union([Type.String(), Type.Null()], {
      description:
        'The first characters of the token (fw_pat_ and 4 more), to recognise it; null for tokens made before prefixes were kept',
    }),
    scopes: Type.Array(Scope, { description: 'What the token may do (within what its user may do)' }),
    created: Timestamp,
    lastUsed: Type.Union([Timestamp, Type.Null()], {
      description:
        'When the token last authenticated a request, to within a minute (each server writes uses in batches); null if never',
    }),
    expiresAt: Type.Union([Timestamp, Type.Null()], { description: 'When the token stops working; null for never' }),
  },
  { $id: 'PersonalToken', title: 'PersonalToken' },
);
export type PersonalToken = Static<typeof PersonalToken>;

export const PersonalTokenList = Type.Object({ tokens: Type.Array(Type.Ref(PersonalToken)) });

export const PersonalTokenCreate = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'What the token is for, to recognise it in the list',
    }),
    scopes: Type.Optional(
      Type.Array(Scope, {
        minItems: 1,
        maxItems: SCOPES.length,
        uniqueItems: true,
        description: 'At most the scopes of the token making the request, which is also the default',
      }),
    ),
    expiresAt: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'When the token stops working: in the future, at most ten years ahead',
      }),
    ),
    expiresInDays: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_TOKEN_DAYS,
        description: 'Instead of expiresAt: the token stops working this many days from now',
      }),
    ),
  },
  {
    additionalProperties: false,
    title: 'PersonalTokenCreate',
    description: 'Without expiresAt or expiresInDays the token never expires',
  },
);
export type PersonalTokenCreate = Static<typeof PersonalTokenCreate>;

export const PersonalTokenCreated = Type.Object(
  {
    ...PersonalToken.properties,
    token: Type.String({ description: 'The token itself: shown once, here; only its hash is kept' }),
  },
  { title: 'PersonalTokenCreated' },
);
export type PersonalTokenCreated = Static<typeof PersonalTokenCreated>;

export const PersonalTokenRevoked = Type.Object({ id: Id, revoked: Type.Literal(true) });
