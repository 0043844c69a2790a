import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { principal } from '../../http/auth.js';
import type { Caller } from '../permissions/caller.js';
import { errors, Id, idParams } from '../../http/schemas.js';
import { MAX_FIELDS_PER_FORM } from '../fields/schemas.js';
import { escapeHtml } from './escape.js';
import { assetUrls } from './assets.js';
import * as service from './service.js';

const tags = ['Forms'];
const day = Type.String({ format: 'date', description: 'A UTC day, YYYY-MM-DD' });
const Refusals = Type.Object({
  rateLimit: Type.Integer({ description: 'Over PUBLIC_SUBMIT_PER_MINUTE from one address' }),
  honeypot: Type.Integer({ description: 'The hidden field that people never see was filled in' }),
  tooFast: Type.Integer({ description: 'Sent sooner than PUBLIC_SUBMIT_MIN_SECONDS after the page loaded' }),
  tooLarge: Type.Integer({ description: 'A body over BODY_LIMIT' }),
});
const Counts = {
  views: Type.Integer({ description: 'Hosted page loads' }),
  starts: Type.Integer({ description: 'Pages where someone began to fill in the form (first input)' }),
  partialSaves: Type.Integer({ description: 'Saves of unfinished entries' }),
  completions: Type.Integer({ description: 'Submissions made on the hosted page' }),
};
const FormStats = Type.Object({
  formId: Id,
  from: day,
  to: day,
  totals: Type.Object({ ...Counts, refused: Refusals }),
  completionRate: Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], {
    description: 'completions / starts over the range; null without starts',
  }),
  days: Type.Array(Type.Object({ day, ...Counts, refused: Refusals }), {
    description: 'Days with any count, oldest first',
  }),
});

const PrefillBody = Type.Object(
  {
    fields: Type.Array(
      Type.Object(
        {
          id: Type.Union([Id, Type.String({ pattern: '^[1-9][0-9]{0,9}$' })]),
          value: Type.Unknown({ description: 'As in a submission' }),
        },
        { additionalProperties: false },
      ),
      { maxItems: MAX_FIELDS_PER_FORM },
    ),
  },
  { additionalProperties: false, title: 'PrefillRequest' },
);

/** The token API's side of hosted forms: embed HTML, prefill URLs and page statistics. */
/** A form's HTML to embed in another page (GET /forms/{formId}/html, and the v2 /form/{id}/html). */
export async function embedHtml(ctx: AppContext, deps: service.HostedDeps, caller: Caller, formId: number) {
  const def = await service.apiForm(deps, caller, { formId });
  const base = ctx.config.publicUrl;
  const assets = await assetUrls(base);
  const form = await service.formHtml(deps, def, { base });
  // The form's theme (docs/themes.md) comes after the page's own sheet.
  const theme = `${base}${service.themeAssets(def.form.view_key, def.theme).css}`;
  return {
    formId: def.form.id,
    url: `${base}/f/${def.form.view_key}`,
    html: `<link rel="stylesheet" href="${assets.css}">\n<link rel="stylesheet" href="${escapeHtml(theme)}">\n<script src="${assets.js}" defer></script>\n${form}`,
    styles: [assets.css, theme],
    scripts: [assets.js],
  };
}

export function hostedApiRoutes(ctx: AppContext, deps: service.HostedDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/forms/:formId/html',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'getFormHtml',
          summary: "The form's HTML, to embed in another page",
          description:
            "html is the whole form, ready to place in a page: it links its style sheets (the page's, then the form's theme) and script " +
            '(also listed in styles and scripts) ' +
            'and posts to the service. Labels and every other text are escaped. Without the script it still works as a plain HTML form, ' +
            'except for file and signature fields. Each call gives HTML with a new page token (valid 24 hours).',
          params: idParams('formId'),
          response: {
            200: Type.Object({
              formId: Id,
              url: Type.String({ description: 'The hosted page' }),
              html: Type.String(),
              styles: Type.Array(Type.String()),
              scripts: Type.Array(Type.String()),
            }),
            ...errors(403, 404),
          },
        },
      },
      (req) => embedHtml(ctx, deps, principal(req), req.params.formId),
    );

    app.post(
      '/forms/:formId/prefill',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'createPrefillUrl',
          summary: 'Make a URL that opens the form with these values',
          description:
            "The values are checked as a submission's (400 naming unknown fields and bad values; file, signature and card fields cannot be prefilled) " +
            'and kept by the service behind a signed token, which the URL carries; the URL stops working after PREFILL_TTL_DAYS. Required fields need not be given. ' +
            'On an encrypted form the token has a third part, a key that seals the stored values and that the service does not keep.',
          params: idParams('formId'),
          body: PrefillBody,
          response: {
            200: Type.Object({
              url: Type.String(),
              token: Type.String(),
              expires: Type.String({ format: 'date-time' }),
            }),
            ...errors(403, 404),
          },
        },
      },
      (req) => service.createPrefill(deps, principal(req), { formId: req.params.formId }, req.body.fields),
    );

    app.get(
      '/forms/:formId/stats',
      {
        config: { access: { scope: 'forms:read', level: 'view', formFrom: 'formId' } },
        schema: {
          tags,
          operationId: 'getFormStats',
          summary: 'Views, starts, partial saves, completions and refusals of the hosted page, per day',
          description: 'from and to are UTC days, inclusive; by default the 30 days up to today.',
          params: idParams('formId'),
          querystring: Type.Object(
            { from: Type.Optional(day), to: Type.Optional(day) },
            { additionalProperties: false },
          ),
          response: { 200: FormStats, ...errors(403, 404) },
        },
      },
      (req) => service.formStats(deps, principal(req), { formId: req.params.formId }, req.query),
    );
  };
}
