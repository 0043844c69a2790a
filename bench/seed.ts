/**
 * Seeding for the benchmark: one account (made straight in the database file, before the
 * service starts) and its forms (made through the API, as a client would).
 */
import { Clock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { Hasher } from '../src/crypto/hasher.js';
import { openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/service.js';
import type { FieldCreate } from '../src/modules/fields/schemas.js';
import type { FormCreate } from '../src/modules/forms/schemas.js';

export const API = '/api/v2025';

/**
 * Creates the schema and the bench account in DATA_DIR's SQLite file (or, given a
 * postgres:// URL, in that database); returns its token.
 */
export async function createBenchAccount(dataDir: string, databaseUrl?: string): Promise<string> {
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', DATABASE_URL: databaseUrl ?? '' });
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await migrateToLatest(db);
    const created = await createAccount(
      { db: db.kysely, clock: new Clock() },
      { name: 'Bench', email: 'bench@example.com' },
      new Hasher({ concurrency: 1, queueLimit: 0 }).kdf(),
    );
    return created.token;
  } finally {
    await db.close();
  }
}

const options = (n: number, prefix: string) =>
  Array.from({ length: n }, (_, i) => ({
    label: `${prefix} choice ${i + 1}`,
    value: `${prefix.toLowerCase()}-${i + 1}`,
  }));

/** Twenty fields of mixed types, with attributes, options and default values, as forms really have. */
export function benchFields(formNo: number): FieldCreate[] {
  const fields: FieldCreate[] = [
    { type: 'section', label: 'About you', attributes: { text: `Form ${formNo}: tell us who you are.` } },
    {
      type: 'name',
      label: 'Your name',
      required: true,
      attributes: { showPrefix: true, showMiddle: false },
      defaultValue: { first: 'Ada' },
    },
    {
      type: 'email',
      label: 'Email',
      required: true,
      unique: true,
      attributes: { placeholder: 'you@example.com', confirm: true },
    },
    {
      type: 'phone',
      label: 'Phone',
      columnSpan: 6,
      attributes: { format: 'international', placeholder: '+1 555 0100' },
    },
    {
      type: 'address',
      label: 'Address',
      attributes: { format: 'international', showAddress2: true, defaultCountry: 'US' },
    },
    {
      type: 'datetime',
      label: 'Preferred date',
      columnSpan: 6,
      attributes: { format: 'date', minDate: '2020-01-01', maxDate: '2030-12-31' },
    },
    {
      type: 'text',
      label: 'Company',
      description: 'Where you work, if anywhere',
      attributes: { placeholder: 'Acme Inc.', maxLength: 200 },
      defaultValue: '',
    },
    {
      type: 'number',
      label: 'Team size',
      columnSpan: 4,
      attributes: { min: 1, max: 10_000, decimals: 0 },
      defaultValue: 10,
    },
    {
      type: 'select',
      label: 'Country of residence',
      attributes: { placeholder: 'Pick one' },
      options: options(12, 'Country'),
      defaultValue: 'country-1',
    },
    {
      type: 'radio',
      label: 'How did you hear about us?',
      attributes: { layout: 'vertical' },
      options: options(5, 'Source'),
    },
    {
      type: 'checkbox',
      label: 'Interests',
      attributes: { layout: 'horizontal', minSelected: 1, maxSelected: 3 },
      options: options(6, 'Topic'),
      defaultValue: ['topic-1'],
    },
    {
      type: 'matrix',
      label: 'Rate us',
      attributes: {
        rows: ['Speed', 'Quality', 'Price', 'Support'],
        columns: ['Poor', 'Fair', 'Good', 'Great'],
        multiple: false,
      },
    },
    {
      type: 'textarea',
      label: 'Comments',
      description: 'Anything else we should know',
      attributes: { rows: 6, maxLength: 5000 },
    },
    {
      type: 'file',
      label: 'Attachments',
      attributes: { maxFiles: 3, maxFileSize: 5 * 1024 * 1024, allowedTypes: ['pdf', 'png', 'jpg'] },
    },
    {
      type: 'product',
      label: 'Conference ticket',
      attributes: { price: 199.5, currency: 'EUR', minQuantity: 1, maxQuantity: 10 },
    },
    { type: 'creditcard', label: 'Card', attributes: { cardTypes: ['visa', 'mastercard', 'amex'] } },
    {
      type: 'richtext',
      label: 'Terms',
      attributes: { html: '<p>By submitting you agree to our <a href="https://example.com/terms">terms</a>.</p>' },
    },
    {
      type: 'embed',
      label: 'Video',
      hideLabel: true,
      attributes: { html: '<iframe src="https://example.com/embed/intro" width="560" height="315"></iframe>' },
    },
    { type: 'signature', label: 'Signature', required: true, attributes: { maxFileSize: 512 * 1024 } },
    {
      type: 'text',
      label: 'Referral code',
      hidden: true,
      readOnly: true,
      attributes: { minLength: 4, maxLength: 12 },
      defaultValue: `REF${formNo}`,
    },
  ];
  return fields;
}

export function benchForm(formNo: number): FormCreate {
  return {
    name: `Bench form ${String(formNo).padStart(4, '0')}`,
    submitButtonTitle: 'Send',
    settings: {
      description: `Benchmark form number ${formNo}`,
      language: 'en',
      labelPosition: 'top',
      successMessage: 'Thanks!',
    },
    fields: benchFields(formNo),
  };
}

/** Creates `count` forms through POST /forms, a few at a time; returns their ids. */
export async function seedForms(baseUrl: string, token: string, count: number, concurrency = 4): Promise<number[]> {
  const ids: number[] = [];
  let next = 1;
  const worker = async () => {
    while (next <= count) {
      const formNo = next++;
      const res = await fetch(`${baseUrl}${API}/forms`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(benchForm(formNo)),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`seeding form ${formNo}: HTTP ${res.status}: ${text.slice(0, 500)}`);
      const form = JSON.parse(text) as { id: number; fields?: unknown[] };
      if (form.fields?.length !== 20)
        throw new Error(`seeding form ${formNo}: expected 20 fields back, got ${form.fields?.length}`);
      ids.push(form.id);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return ids.sort((a, b) => a - b);
}
