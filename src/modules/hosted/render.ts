import { TYPE_RULES } from '../fields/types.js';
import type { FormSettings } from '../forms/schemas.js';
import {
  CARD_PARTS,
  inputName,
  optionsInControls,
  splitPages,
  subfieldsOf,
  withoutDefaults,
  type PageField,
} from './form-model.js';
import { escapeHtml as e, jsonForScript, paragraphs, sanitizeHtml } from './escape.js';

/**
 * The HTML of a hosted form: one fragment, used by the page at the form's URL and by
 * GET /forms/{formId}/html. It works as a plain HTML form; the script (client/main.ts)
 * adds live logic, checks, pages, uploads, the signature pad and saving progress.
 */

export interface RenderedForm {
  viewKey: string;
  name: string;
  submitButtonTitle: string;
  settings: FormSettings;
  fields: PageField[];
  /** Whether the page can save progress (settings.saveAndResume). */
  saveAndResume: boolean;
}

export interface RenderState {
  /** Values shown in the inputs: defaults, prefilled or resumed values, or what was posted. */
  values: Map<number, unknown>;
  /** Problems per field id, shown next to the field. */
  errors: Map<number, string>;
  /** A problem with the submission as a whole. */
  formError?: string;
  /** The signed load token (hosted/tokens.ts): the submit's idempotency key and its timing check. */
  loadToken: string;
  /** A resume token, when the page continues a partial submission. */
  resumeToken?: string;
  /** The base of the page's own URLs: '' on the page, PUBLIC_URL in embedded HTML. */
  base: string;
}

const LABEL_HIDDEN = 'fw-visually-hidden';

const AUTOCOMPLETE: Record<string, string> = {
  prefix: 'honorific-prefix',
  first: 'given-name',
  middle: 'additional-name',
  initial: 'additional-name',
  last: 'family-name',
  suffix: 'honorific-suffix',
  address: 'address-line1',
  address2: 'address-line2',
  city: 'address-level2',
  state: 'address-level1',
  zip: 'postal-code',
  country: 'country-name',
  number: 'cc-number',
  expMonth: 'cc-exp-month',
  expYear: 'cc-exp-year',
  cvv: 'cc-csc',
};

const PART_LABELS: Record<string, string> = {
  prefix: 'Prefix',
  first: 'First name',
  middle: 'Middle name',
  initial: 'Middle initial',
  last: 'Last name',
  suffix: 'Suffix',
  address: 'Street address',
  address2: 'Address line 2',
  city: 'City',
  state: 'State / Province',
  zip: 'ZIP / Postal code',
  country: 'Country',
  number: 'Card number',
  expMonth: 'Expiry month (MM)',
  expYear: 'Expiry year (YYYY)',
  cvv: 'Security code',
};

function texts(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  if (typeof value === 'string' || typeof value === 'number') return [String(value)];
  return [];
}

function part(value: unknown, key: string): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return '';
  const v = (value as Record<string, unknown>)[key];
  return typeof v === 'string' || typeof v === 'number' ? String(v) : '';
}

const attr = (name: string, value: string | number | undefined | false) =>
  value === undefined || value === false ? '' : ` ${name}="${e(String(value))}"`;

/** An input's value attribute, left out when empty (an input without one is empty: a page shows many). */
const valueAttr = (value: string) => (value === '' ? '' : attr('value', value));

/** aria-describedby of a field's inputs: its hint (when it has one) and its error slot. */
function describedBy(f: PageField): string {
  return [f.description ? `f${f.id}-hint` : '', `f${f.id}-error`].filter(Boolean).join(' ');
}

function common(f: PageField, error: string | undefined, logic: boolean): string {
  return (
    attr('aria-describedby', describedBy(f)) +
    (error ? ' aria-invalid="true"' : '') +
    // Logic may hide a field; the server (and the script) decide whether it is required then.
    (f.required && !logic ? ' required' : '') +
    (f.required ? ' aria-required="true"' : '') +
    (f.readOnly ? ' readonly' : '')
  );
}

function textInput(f: PageField, value: unknown, error: string | undefined, logic: boolean): string {
  const a = f.attributes;
  const v = texts(value)[0] ?? '';
  const base = `id="${inputName(f.id)}" name="${inputName(f.id)}"${common(f, error, logic)}${attr('placeholder', a.placeholder as string | undefined)}`;
  switch (f.type) {
    case 'textarea':
      return `<textarea ${base}${attr('rows', (a.rows as number | undefined) ?? 4)}${attr('maxlength', a.maxLength as number | undefined)}${attr('minlength', a.minLength as number | undefined)}>${e(v)}</textarea>`;
    case 'email':
      return `<input type="email" ${base} autocomplete="email"${valueAttr(v)}>`;
    case 'phone':
      return `<input type="tel" ${base} autocomplete="tel"${valueAttr(v)}>`;
    case 'number': {
      const step = typeof a.decimals === 'number' ? String(10 ** -a.decimals) : 'any';
      return `<input type="number" inputmode="decimal" ${base}${attr('min', a.min as number | undefined)}${attr('max', a.max as number | undefined)} step="${e(step)}"${valueAttr(v)}>`;
    }
    case 'datetime': {
      const format = (a.format as string | undefined) ?? 'date';
      const type = format === 'datetime' ? 'datetime-local' : format;
      const shown = format === 'datetime' ? v.replace(' ', 'T') : v;
      const min = format === 'time' ? undefined : (a.minDate as string | undefined);
      const max = format === 'time' ? undefined : (a.maxDate as string | undefined);
      return `<input type="${type}" ${base}${attr('min', min && format === 'datetime' ? `${min}T00:00` : min)}${attr('max', max && format === 'datetime' ? `${max}T23:59` : max)}${valueAttr(shown)}>`;
    }
    default:
      return `<input type="text" ${base}${attr('maxlength', a.maxLength as number | undefined)}${attr('minlength', a.minLength as number | undefined)}${valueAttr(v)}>`;
  }
}

/** An option's image, next to its label (which names it: the image itself says nothing more to a screen reader). */
function optionImage(f: PageField, value: string, base: string): string {
  const url = f.optionImages?.[value];
  return url
    ? `<img class="fw-option-image" src="${e(`${base}${url}`)}" alt="" width="48" height="48" loading="lazy">`
    : '';
}

type Options = PageField['options'];

/**
 * A field's options with their values and labels escaped, once per array: the fields that use
 * one smart list share its array (hosted/service.ts), so a list shown by several fields is
 * escaped once, and its select options written once (plainOptions). Arrays of a page's
 * definition are never changed; a new definition reads new ones, and these go with the old.
 */
const escapedOptions = new WeakMap<Options, { values: string[]; labels: string[] }>();
function escapedOf(options: Options): { values: string[]; labels: string[] } {
  let escaped = escapedOptions.get(options);
  if (!escaped) {
    const values = new Array<string>(options.length);
    const labels = new Array<string>(options.length);
    for (let i = 0; i < options.length; i++) {
      values[i] = e(options[i]!.value);
      labels[i] = e(options[i]!.label);
    }
    escaped = { values, labels };
    escapedOptions.set(options, escaped);
  }
  return escaped;
}

function choices(f: PageField, value: unknown, error: string | undefined, logic: boolean, base: string): string {
  const chosen = new Set(texts(value));
  const type = f.type === 'checkbox' ? 'checkbox' : 'radio';
  const horizontal = f.attributes.layout === 'horizontal' ? ' fw-horizontal' : '';
  const name = inputName(f.id);
  // A radio group is required through its inputs; checkboxes through the script and server.
  const flags = `${type === 'radio' && f.required && !logic ? ' required' : ''}${f.readOnly ? ' disabled' : ''}`;
  const { values, labels } = escapedOf(f.options);
  const items = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const raw = f.options[i]!.value;
    const checked = chosen.size > 0 && chosen.has(raw) ? ' checked' : '';
    const image = f.optionImages ? optionImage(f, raw, base) : '';
    // A read-only choice is a disabled input, which a form post leaves out (there is no readonly
    // for radios and checkboxes): a hidden input beside it carries its value.
    const carried = checked && f.readOnly ? `<input type="hidden" name="${name}" value="${values[i]}">` : '';
    items[i] =
      `<div class="fw-choice"><input type="${type}" id="${name}-${i}" name="${name}" value="${values[i]}"${checked}${flags}>${carried}<label for="${name}-${i}">${image}${labels[i]}</label></div>`;
  }
  return `<div class="fw-choices${horizontal}"${error ? ' aria-invalid="true"' : ''}>${items.join('')}</div>`;
}

/** A select's options with none selected, written once per array of options. */
const plainOptions = new WeakMap<Options, string>();

function selectOptions(options: Options, chosen: Set<string>): string {
  const kept = chosen.size === 0 ? plainOptions.get(options) : undefined;
  if (kept !== undefined) return kept;
  const { values, labels } = escapedOf(options);
  const items = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const selected = chosen.size > 0 && chosen.has(options[i]!.value) ? ' selected' : '';
    items[i] = `<option value="${values[i]}"${selected}>${labels[i]}</option>`;
  }
  const html = items.join('');
  if (chosen.size === 0) plainOptions.set(options, html);
  return html;
}

function select(f: PageField, value: unknown, error: string | undefined, logic: boolean, base: string): string {
  const chosen = new Set(texts(value));
  const placeholder = (f.attributes.placeholder as string | undefined) ?? 'Choose…';
  const options = selectOptions(f.options, chosen);
  // A select cannot show images in its options: they are shown beside it, each with its label.
  const gallery = f.optionImages
    ? `<ul class="fw-option-gallery">${f.options
        .filter((o) => f.optionImages![o.value])
        .map((o) => `<li>${optionImage(f, o.value, base)}<span>${e(o.label)}</span></li>`)
        .join('')}</ul>`
    : '';
  return `<select id="${inputName(f.id)}" name="${inputName(f.id)}"${common(f, error, logic)}><option value="">${e(placeholder)}</option>${options}</select>${gallery}`;
}

function parts(f: PageField, keys: readonly string[], value: unknown, error: string | undefined): string {
  return `<div class="fw-parts fw-parts-${f.type}">${keys
    .map((k) => {
      const id = inputName(f.id, k);
      const narrow = k === 'prefix' || k === 'suffix' || k === 'initial' || k === 'expMonth' || k === 'cvv';
      const numeric = f.type === 'creditcard' ? ' inputmode="numeric"' : '';
      return `<div class="fw-part${narrow ? ' fw-narrow' : ''}"><label for="${id}">${e(PART_LABELS[k] ?? k)}</label><input type="text" id="${id}" name="${id}"${numeric} autocomplete="${AUTOCOMPLETE[k] ?? 'off'}"${attr('aria-describedby', describedBy(f))}${error ? ' aria-invalid="true"' : ''}${valueAttr(f.type === 'creditcard' ? '' : part(value, k))}></div>`;
    })
    .join('')}</div>`;
}

function matrix(f: PageField, value: unknown, error: string | undefined): string {
  const rows = (f.attributes.rows as string[] | undefined) ?? [];
  const columns = (f.attributes.columns as string[] | undefined) ?? [];
  const type = f.attributes.multiple === true ? 'checkbox' : 'radio';
  const head = columns.map((c) => `<th scope="col">${e(c)}</th>`).join('');
  const body = rows
    .map((row, r) => {
      const picked = part(value, row)
        .split(', ')
        .filter((s) => s !== '');
      const cells = columns
        .map(
          (c, i) =>
            `<td><input type="${type}" id="${inputName(f.id, r)}-${i}" name="${inputName(f.id, r)}" value="${e(c)}" aria-label="${e(`${row}: ${c}`)}"${picked.includes(c) ? ' checked' : ''}${error ? ' aria-invalid="true"' : ''}></td>`,
        )
        .join('');
      return `<tr><th scope="row">${e(row)}</th>${cells}</tr>`;
    })
    .join('');
  return `<div class="fw-matrix"><table><thead><tr><td></td>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
}

function fileInput(f: PageField, value: unknown): string {
  const a = f.attributes;
  const maxFiles = (a.maxFiles as number | undefined) ?? 1;
  const accept = Array.isArray(a.allowedTypes) ? (a.allowedTypes as string[]).map((t) => `.${t}`).join(',') : '';
  const kept = Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  return `<div class="fw-file" data-max-files="${maxFiles}"><input type="file" id="${inputName(f.id)}"${attr('accept', accept || undefined)}${maxFiles > 1 ? ' multiple' : ''}${attr('aria-describedby', describedBy(f))} disabled><ul class="fw-files" aria-live="polite"></ul>${kept.map((k) => `<input type="hidden" name="${inputName(f.id, 'fileKey')}" value="${e(k)}">`).join('')}<noscript><p class="fw-hint">Attaching files needs JavaScript.</p></noscript></div>`;
}

function signature(f: PageField): string {
  return `<div class="fw-signature"><canvas class="fw-pad" width="600" height="180" tabindex="0" role="img" aria-label="${e(`Signature pad for ${f.label}: draw with a mouse, a finger or a pen`)}" id="${inputName(f.id)}"${attr('aria-describedby', describedBy(f))}></canvas><div class="fw-pad-tools"><label for="${inputName(f.id, 'typed')}">Or type your name to sign</label><input type="text" id="${inputName(f.id, 'typed')}" autocomplete="name"${attr('aria-describedby', describedBy(f))}><button type="button" class="fw-button fw-secondary fw-pad-clear">Clear signature</button></div><noscript><p class="fw-hint">Signing needs JavaScript.</p></noscript></div>`;
}

function control(f: PageField, value: unknown, error: string | undefined, base: string): string {
  const logic = f.logic !== null;
  switch (f.type) {
    case 'select':
      return select(f, value, error, logic, base);
    case 'radio':
    case 'checkbox':
      return choices(f, value, error, logic, base);
    case 'name':
    case 'address':
      return parts(f, subfieldsOf(f), value, error);
    case 'creditcard':
      return parts(f, CARD_PARTS, value, error);
    case 'matrix':
      return matrix(f, value, error);
    case 'file':
      return fileInput(f, value);
    case 'signature':
      return signature(f);
    case 'product': {
      const price = Number(f.attributes.price ?? 0);
      const currency = (f.attributes.currency as string | undefined) ?? 'USD';
      const quantity = textInput(
        {
          ...f,
          type: 'number',
          attributes: { min: f.attributes.minQuantity ?? 0, max: f.attributes.maxQuantity, decimals: 0 },
        },
        value,
        error,
        logic,
      );
      return `<p class="fw-price">${e(`${currency} ${price.toFixed(2)} each`)}</p>${quantity}`;
    }
    default:
      return textInput(f, value, error, logic);
  }
}

/** Field types whose label names a group of inputs (fieldset and legend) rather than one input. */
const GROUPS = new Set(['radio', 'checkbox', 'name', 'address', 'creditcard', 'matrix']);

function field(f: PageField, state: RenderState): string {
  const hiddenAttr = f.hidden ? ' hidden data-always-hidden="true"' : '';
  const head = `<div class="fw-field fw-type-${f.type}" id="fw-field-${f.id}"${hiddenAttr}>`;
  if (f.type === 'section') {
    const text = typeof f.attributes.text === 'string' ? paragraphs(f.attributes.text) : '';
    return `${head}<h2 class="fw-section">${e(f.label)}</h2>${text}${f.description ? `<div class="fw-hint">${paragraphs(f.description)}</div>` : ''}</div>`;
  }
  if (f.type === 'richtext' || f.type === 'embed') {
    const html = typeof f.attributes.html === 'string' ? sanitizeHtml(f.attributes.html) : '';
    return `${head}<div class="fw-rich">${html}</div></div>`;
  }
  if (!TYPE_RULES[f.type].input) return '';
  const error = state.errors.get(f.id);
  const labelClass = f.hideLabel ? ` class="${LABEL_HIDDEN}"` : '';
  const mark = f.required ? ' <span class="fw-required" aria-hidden="true">*</span>' : '';
  const hint = f.description ? `<p class="fw-hint" id="f${f.id}-hint">${e(f.description)}</p>` : '';
  const errorSlot = `<p class="fw-error" id="f${f.id}-error" aria-live="polite">${error ? e(error) : ''}</p>`;
  const body = control(f, state.values.get(f.id), error, state.base);
  if (GROUPS.has(f.type)) {
    return `${head}<fieldset class="fw-group"${attr('aria-describedby', describedBy(f))}><legend${labelClass}>${e(f.label)}${mark}</legend>${hint}${body}${errorSlot}</fieldset></div>`;
  }
  const labelFor = f.type === 'signature' ? `${inputName(f.id)}` : inputName(f.id);
  const label =
    f.type === 'signature'
      ? `<p class="fw-label${f.hideLabel ? ` ${LABEL_HIDDEN}` : ''}" id="f${f.id}-label">${e(f.label)}${mark}</p>`
      : `<label for="${labelFor}"${labelClass}>${e(f.label)}${mark}</label>`;
  return `${head}${label}${hint}${body}${errorSlot}</div>`;
}

/** The definition that the script reads: what the checks, the logic and the pages need. */
function definition(form: RenderedForm, base: string) {
  return {
    viewKey: form.viewKey,
    base,
    saveAndResume: form.saveAndResume,
    fields: form.fields.map((f) =>
      withoutDefaults({
        id: f.id,
        type: f.type,
        label: f.label,
        required: f.required,
        unique: f.unique,
        options: optionsInControls(f) ? undefined : f.options,
        attributes: f.attributes,
        logic: f.logic,
        hidden: f.hidden,
      }),
    ),
  };
}

/** The form itself: the HTML fragment that the page and the embed code share. */
export function renderForm(form: RenderedForm, state: RenderState): string {
  const pages = splitPages(form.fields);
  const action = `${state.base}/f/${encodeURIComponent(form.viewKey)}`;
  const errorCount = state.errors.size;
  const summary =
    state.formError || errorCount > 0
      ? `<div class="fw-alert" role="alert" tabindex="-1" id="fw-summary"><p>${e(state.formError ?? `Please correct ${errorCount === 1 ? 'the field' : `the ${errorCount} fields`} marked below.`)}</p>${
          errorCount > 0
            ? `<ul>${[...state.errors.entries()]
                .map(([id, msg]) => {
                  const f = form.fields.find((x) => x.id === id);
                  return `<li><a href="#fw-field-${id}">${e(f ? f.label : `Field ${id}`)}: ${e(msg)}</a></li>`;
                })
                .join('')}</ul>`
            : ''
        }</div>`
      : '<div class="fw-alert" role="alert" tabindex="-1" id="fw-summary" hidden></div>';
  const pageHtml = pages
    .map((fields, i) => `<div class="fw-page" data-page="${i}">${fields.map((f) => field(f, state)).join('')}</div>`)
    .join('');
  const position = form.settings.labelPosition ?? 'top';
  const save = form.saveAndResume
    ? `<button type="button" class="fw-button fw-secondary fw-save" hidden>Save and continue later</button>`
    : '';
  const progress =
    pages.length > 1
      ? `<div class="fw-progress" hidden><label for="fw-progress-${e(form.viewKey)}" class="fw-progress-label">Page 1 of ${pages.length}</label><progress id="fw-progress-${e(form.viewKey)}" max="${pages.length}" value="1"></progress></div>`
      : '';
  return `<form class="fw-form fw-labels-${e(position)}" method="post" action="${e(action)}" data-fw-form="${e(form.viewKey)}" accept-charset="utf-8">
<script type="application/json" class="fw-definition">${jsonForScript(definition(form, state.base))}</script>
${summary}${progress}
<input type="hidden" name="_fw" value="${e(state.loadToken)}">${state.resumeToken ? `<input type="hidden" name="_resume" value="${e(state.resumeToken)}">` : ''}
<div class="fw-hp" aria-hidden="true"><label for="fw-hp-${e(form.viewKey)}">Leave this field empty</label><input type="text" id="fw-hp-${e(form.viewKey)}" name="website" tabindex="-1" autocomplete="off"></div>
${pageHtml}
<div class="fw-resume" hidden aria-live="polite"></div>
<div class="fw-actions"><button type="button" class="fw-button fw-secondary fw-back" hidden>Back</button><button type="button" class="fw-button fw-next" hidden>Next</button>${save}<button type="submit" class="fw-button fw-submit">${e(form.submitButtonTitle)}</button></div>
</form>`;
}
