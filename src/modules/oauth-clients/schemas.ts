import { Type, type Static } from '@sinclair/typebox';
import { Id, Timestamp } from '../../http/schemas.js';

const redirectUris = Type.Array(Type.String({ minLength: 1, maxLength: 2000 }), {
  minItems: 1,
  maxItems: 20,
  description:
    'Exact redirect URIs; the authorize request must name one of them character for character. https, or http on localhost, 127.0.0.1 or [::1]; ' +
    'no fragment, no user name or password, no control characters or whitespace, and written as the WHATWG URL parser writes it ' +
    '(https://app.example.com/, not https://app.example.com); a 400 says how to write one that is not.',
});

const name = Type.String({ minLength: 1, maxLength: 200, description: 'Shown to users on the consent page' });
const requirePkceMeaning =
  'Whether every authorization request must carry a PKCE challenge (code_challenge with code_challenge_method=S256); ' +
  'true unless set to false for an application that cannot do PKCE (RFC 9700 recommends PKCE for every client).';
const requirePkce = Type.Boolean({ description: requirePkceMeaning });

export const OAuthClientCreate = Type.Object(
  { name, redirectUris, requirePkce: Type.Optional(Type.Boolean({ description: requirePkceMeaning, default: true })) },
  { additionalProperties: false, title: 'OAuthClientCreate' },
);
export type OAuthClientCreate = Static<typeof OAuthClientCreate>;

export const OAuthClientUpdate = Type.Object(
  { name: Type.Optional(name), redirectUris: Type.Optional(redirectUris), requirePkce: Type.Optional(requirePkce) },
  {
    additionalProperties: false,
    minProperties: 1,
    title: 'OAuthClientUpdate',
    description: 'Only the properties sent change',
  },
);
export type OAuthClientUpdate = Static<typeof OAuthClientUpdate>;

export const OAuthClient = Type.Object(
  {
    id: Id,
    clientId: Type.String({ description: 'The client_id of OAuth requests' }),
    name: Type.String(),
    redirectUris: Type.Array(Type.String()),
    requirePkce,
    created: Timestamp,
  },
  { $id: 'OAuthClient', title: 'OAuthClient' },
);
export type OAuthClient = Static<typeof OAuthClient>;

export const OAuthClientCreated = Type.Object(
  {
    id: Id,
    clientId: Type.String(),
    clientSecret: Type.String({ description: 'Shown once, here; only its hash is kept' }),
    name: Type.String(),
    redirectUris: Type.Array(Type.String()),
    requirePkce,
    created: Timestamp,
  },
  { title: 'OAuthClientCreated' },
);
export type OAuthClientCreated = Static<typeof OAuthClientCreated>;

export const OAuthClientList = Type.Object({ clients: Type.Array(Type.Ref(OAuthClient)) });
export const OAuthClientDeleted = Type.Object({ id: Id, deleted: Type.Literal(true) });
