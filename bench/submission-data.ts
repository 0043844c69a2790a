/**
 * The submissions benchmark's form and its data: one 10-field form of mixed types, and
 * realistic, varied, deterministic submission bodies for it (body n is always the same).
 * The POST benchmark sends these bodies and bench/seed-submissions.ts stores them, so the
 * seeded rows are what the API would have made of the same requests.
 *
 * Selectivity by construction (seed-submissions.ts counts the exact matches):
 *   KEYWORD ("warranty"): one of ~320 content words, 3 to 6 of which make up 90% of the
 *     comments: about 1.3% of submissions.
 *   CRITERIA: country "Canada" (1 in 12) and source "Social media" (1 in 5): about 1.7%.
 */
import type { FieldCreate } from '../src/modules/fields/schemas.js';
import type { FormCreate } from '../src/modules/forms/schemas.js';
import { API } from './seed.js';

export const SUBMISSION_FIELD_COUNT = 10;

const COUNTRIES: [string, string][] = [
  ['United States', 'us'],
  ['Canada', 'ca'],
  ['Mexico', 'mx'],
  ['Brazil', 'br'],
  ['United Kingdom', 'gb'],
  ['France', 'fr'],
  ['Germany', 'de'],
  ['Spain', 'es'],
  ['Italy', 'it'],
  ['India', 'in'],
  ['Japan', 'jp'],
  ['Australia', 'au'],
];
const SOURCES: [string, string][] = [
  ['Search engine', 'search'],
  ['Friend or colleague', 'friend'],
  ['Social media', 'social'],
  ['Conference', 'conference'],
  ['Newsletter', 'newsletter'],
];
const INTERESTS: [string, string][] = [
  ['Analytics', 'analytics'],
  ['Automation', 'automation'],
  ['Integrations', 'integrations'],
  ['Security', 'security'],
  ['Pricing', 'pricing'],
  ['Support', 'support'],
];

const options = (list: [string, string][]) => list.map(([label, value]) => ({ label, value }));

/** Field labels, in display order; the benchmark finds field ids by label. */
export const LABELS = {
  name: 'Your name',
  email: 'Email',
  company: 'Company',
  comments: 'Comments',
  teamSize: 'Team size',
  country: 'Country',
  interests: 'Interests',
  source: 'How did you hear about us?',
  date: 'Preferred start date',
  phone: 'Phone',
} as const;

export function submissionFormFields(): FieldCreate[] {
  return [
    { type: 'name', label: LABELS.name, required: true, attributes: { showPrefix: true } },
    {
      type: 'email',
      label: LABELS.email,
      required: true,
      unique: true,
      attributes: { placeholder: 'you@example.com' },
    },
    { type: 'text', label: LABELS.company, attributes: { maxLength: 200 } },
    { type: 'textarea', label: LABELS.comments, attributes: { rows: 5, maxLength: 5000 } },
    { type: 'number', label: LABELS.teamSize, attributes: { min: 1, max: 100_000, decimals: 0 } },
    { type: 'select', label: LABELS.country, required: true, options: options(COUNTRIES) },
    {
      type: 'checkbox',
      label: LABELS.interests,
      attributes: { minSelected: 1, maxSelected: 3 },
      options: options(INTERESTS),
    },
    { type: 'radio', label: LABELS.source, options: options(SOURCES) },
    {
      type: 'datetime',
      label: LABELS.date,
      attributes: { format: 'date', minDate: '2020-01-01', maxDate: '2030-12-31' },
    },
    { type: 'phone', label: LABELS.phone, attributes: { format: 'international' } },
  ];
}

export function submissionForm(name: string): FormCreate {
  return {
    name,
    submitButtonTitle: 'Request a demo',
    settings: { description: 'Demo requests', language: 'en', successMessage: 'Thanks, we will be in touch.' },
    fields: submissionFormFields(),
  };
}

/** The keyword searched for and the two field criteria (by label) of the field search. */
export const KEYWORD = 'warranty';
export const CRITERIA: { field: keyof typeof LABELS; value: string }[] = [
  { field: 'country', value: 'Canada' },
  { field: 'source', value: 'Social media' },
];

const FIRST = (
  'James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan Joseph Jessica Thomas Sarah ' +
  'Charles Karen Christopher Lisa Daniel Nancy Matthew Betty Anthony Sandra Mark Margaret Donald Ashley Steven Kimberly Andrew Emily ' +
  'Paul Donna Joshua Michelle Kenneth Carol Kevin Amanda Brian Melissa George Deborah Timothy Stephanie Ronald Rebecca Jason Laura ' +
  'Edward Helen Jeffrey Sharon Ryan Cynthia Jacob Kathleen Zoë Renée José Chloé Amélie'
).split(' ');
const LAST = (
  'Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson Anderson Thomas Taylor ' +
  'Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott ' +
  'Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Müller Dubois Rossi Novak Kowalski'
).split(' ');
const PREFIXES = ['Dr.', 'Ms.', 'Mr.', 'Prof.'];
const COMPANY_A =
  'Acme Northwind Contoso Globex Initech Umbrella Stark Wayne Hooli Vandelay Soylent Tyrell Cyberdyne Wonka Oscorp Gringotts Pied Aperture Massive Blue'.split(
    ' ',
  );
const COMPANY_B = [
  'Analytics',
  'Labs',
  'Industries',
  'Logistics',
  'Systems',
  'Health',
  'Media',
  'Partners',
  'Foods',
  'Robotics',
  'Piper',
  'Dynamics',
];
const DOMAINS = ['example.com', 'example.org', 'mail.test', 'inbox.test', 'corp.example'];
const FILLERS = 'the and but was is very really please our we it a to with for of on not too more so this that'.split(
  ' ',
);
/** Content words of the comments; KEYWORD is one of them, and no other word starts with it. */
const VOCABULARY = (
  'account address admin agenda alert answer api app approval archive audit backup badge balance banner batch billing board booking ' +
  'branch budget bug builder button cache calendar campaign cancel capacity card cart catalog category certificate change channel ' +
  'chart chat checkout client cloud column comment compliance config connector contact contract cookie coupon course coverage ' +
  'credit crm csv customer dashboard data database deadline default delay delivery demo deposit design device discount dispatch ' +
  'document domain download draft driver duplicate editor email embed employee encryption endpoint enterprise entry error estimate ' +
  'event excel expense export feature feedback field file filter finance firewall folder font form format freight gateway grant ' +
  'graph guest hardware header helpdesk holiday hosting hotel import incident inventory invoice issue item journal kanban key ' +
  'label language latency layout lead ledger license limit link locale login logo loyalty mailbox manager map margin market ' +
  'meeting member menu merge message metric migration mobile module monitor month network notice notification offer office ' +
  'onboarding order outage owner package page partner password patch payment payroll pdf permission phone pipeline plan platform ' +
  'plugin policy portal poster preview price printer priority privacy product profile project promo proposal quarter query ' +
  'queue quota quote rate receipt record refund region registration release reminder renewal report request reservation ' +
  'resource response restore revenue review role roster route sales sample schedule schema scope screen script seat segment ' +
  'sensor server service session setting shift shipment signature site sketch slack slot software spam spreadsheet sprint staff ' +
  'stage statement status storage store strategy subscription supplier survey sync table target task tax team template tenant ' +
  'territory test theme thread ticket timeline timesheet token tracking traffic training transfer translation trial upgrade ' +
  'upload usage user vacation vendor version video visitor voucher wallet ' +
  `${KEYWORD} webhook website widget wiki workflow workshop workspace zone`
).split(' ');
const OPENERS = [
  'Great',
  'Slow',
  'Broken',
  'Confusing',
  'Excellent',
  'Missing',
  'Useful',
  'Urgent',
  'Simple',
  'Expensive',
];
const AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/125.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15',
  'Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/125.0.0.0 Mobile Safari/537.36',
];

/** A small, fast, seeded generator (mulberry32): the same n always gives the same submission (n < 2^31). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(r: () => number, list: readonly T[]): T => list[Math.floor(r() * list.length)]!;
const digits = (r: () => number, n: number) => Array.from({ length: n }, () => Math.floor(r() * 10)).join('');
const ascii = (s: string) => s.normalize('NFD').replace(/\p{M}+/gu, '');

/** Ids of the form's fields, by the labels above. */
export type FieldIds = Record<keyof typeof LABELS, number>;

export function fieldIdsOf(fields: { id: number; label: string }[]): FieldIds {
  const ids = {} as FieldIds;
  for (const key of Object.keys(LABELS) as (keyof typeof LABELS)[]) {
    const field = fields.find((f) => f.label === LABELS[key]);
    if (!field) throw new Error(`the submission form has no field labelled "${LABELS[key]}"`);
    ids[key] = field.id;
  }
  return ids;
}

export interface FieldInput {
  id: number | string;
  value: unknown;
}

/**
 * Submission number n, as a client sends it: every input shape the API takes
 * ({"value": x}, bare strings and numbers, subfields, {"subvalues": [{"subvalue": x}]}),
 * optional fields sometimes left out. The email holds n, so it is unique.
 */
export function submissionInput(n: number, ids: FieldIds): FieldInput[] {
  const r = rng(Math.imul(n, 0x9e3779b1) ^ 0x5bd1e995);
  const first = pick(r, FIRST);
  const last = pick(r, LAST);
  const fields: FieldInput[] = [];
  const name: Record<string, string> = { first, last };
  if (r() < 0.1) name.prefix = pick(r, PREFIXES);
  fields.push({ id: ids.name, value: name });
  const email = `${ascii(first).toLowerCase()}.${ascii(last).toLowerCase()}${n}@${pick(r, DOMAINS)}`;
  fields.push({ id: String(ids.email), value: r() < 0.5 ? { value: email } : email });
  if (r() < 0.85) fields.push({ id: ids.company, value: `${pick(r, COMPANY_A)} ${pick(r, COMPANY_B)}` });
  if (r() < 0.9) {
    const count = 3 + Math.floor(r() * 4);
    const parts = [pick(r, OPENERS)];
    for (let i = 0; i < count; i++) {
      parts.push(pick(r, VOCABULARY));
      if (r() < 0.5) parts.push(pick(r, FILLERS));
    }
    fields.push({ id: ids.comments, value: { value: `${parts.join(' ')}.` } });
  }
  if (r() < 0.9) fields.push({ id: ids.teamSize, value: Math.max(1, Math.round(Math.exp(r() * 9))) });
  fields.push({ id: ids.country, value: { subvalues: [{ subvalue: pick(r, COUNTRIES)[1] }] } });
  if (r() < 0.95) {
    const chosen = new Set<string>();
    const count = 1 + Math.floor(r() * 3);
    while (chosen.size < count) chosen.add(pick(r, INTERESTS)[1]);
    fields.push({ id: ids.interests, value: { subvalues: [...chosen].map((subvalue) => ({ subvalue })) } });
  }
  if (r() < 0.9) fields.push({ id: ids.source, value: { value: pick(r, SOURCES)[1] } });
  if (r() < 0.7) {
    const day = new Date(Date.UTC(2024, 0, 1) + Math.floor(r() * 1000) * 86_400_000).toISOString().slice(0, 10);
    fields.push({ id: ids.date, value: { value: day } });
  }
  if (r() < 0.8) {
    const phone = r() < 0.6 ? `+1 (${digits(r, 3)}) 555-${digits(r, 4)}` : `+44 20 ${digits(r, 4)} ${digits(r, 4)}`;
    fields.push({ id: ids.phone, value: phone });
  }
  // Clients send fields in any order.
  if (r() < 0.3) fields.reverse();
  return fields;
}

export function submissionBody(n: number, ids: FieldIds): string {
  return JSON.stringify({ fields: submissionInput(n, ids) });
}

/** What a browser would send as its user agent and address, for submission n. */
export function clientOf(n: number): { userAgent: string; remoteAddr: string } {
  const r = rng(Math.imul(n, 0x85ebca6b) ^ 0x27d4eb2f);
  const remoteAddr = r() < 0.5 ? `203.0.113.${Math.floor(r() * 254) + 1}` : `198.51.100.${Math.floor(r() * 254) + 1}`;
  return { userAgent: pick(r, AGENTS), remoteAddr };
}

/** POST of body n to the form at baseUrl, from body n's own client (clientOf): the status and the answer's text. */
export async function postSubmission(
  baseUrl: string,
  token: string,
  formId: number,
  ids: FieldIds,
  n: number,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${baseUrl}${API}/forms/${formId}/submissions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'user-agent': clientOf(n).userAgent,
    },
    body: submissionBody(n, ids),
  });
  return { status: res.status, text: await res.text() };
}
