/**
 * The hosted form in a real headless Chromium: every field type filled in, logic, pages,
 * an upload and a drawn signature, the submission found through the API; a server-side
 * error next to its field; a prefill URL; a partial saved, closed, resumed and finished;
 * the plain HTML submit without JavaScript; escaping of hostile text; and axe-core.
 *
 * Needs /usr/bin/chromium (Debian's package), as test/oauth-browser.test.ts does; skipped
 * without it unless FORMWORK_TEST_REQUIRE_BROWSER is set. Screenshots of a form and its
 * confirmation go to test-artifacts/ (git-ignored).
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContextOptions, Page } from 'playwright-core';
import { jobKinds } from '../src/job-kinds.js';
import { createWorker } from '../src/jobs/worker.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';
import { BROWSER_SUITE_MS, newBrowserPage, skipBrowser, startWithBrowser } from './support/browser.js';
import { startSmtpSink, type SmtpSink } from './support/smtp.js';

const ARTIFACTS = new URL('../test-artifacts/', import.meta.url);
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
// A 1×1 PNG: a file to upload.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

const OPTIONS = (labels: string[]) => labels.map((l) => ({ label: l, value: l.toLowerCase() }));

/** A form with every field type that takes input, logic, two pages, a file and a signature. */
function everyFieldType() {
  return {
    name: 'Volunteer sign-up',
    submitButtonTitle: 'Send my answers',
    settings: {
      description: 'Tell us a little about yourself. It takes about three minutes.',
      successMessage: 'Thank you for signing up!\n\nWe will be in touch within a week.',
      saveAndResume: true,
    },
    fields: [
      { type: 'name', label: 'Your name', required: true },
      { type: 'email', label: 'Email address', required: true, unique: true, description: 'We never share it.' },
      { type: 'phone', label: 'Phone' },
      { type: 'text', label: 'Team name', attributes: { placeholder: 'The Early Birds', maxLength: 40 } },
      { type: 'textarea', label: 'About you', attributes: { rows: 3 } },
      { type: 'number', label: 'Hours per week', attributes: { min: 1, max: 40 } },
      { type: 'datetime', label: 'Start date', attributes: { format: 'date' } },
      { type: 'select', label: 'Shirt size', options: OPTIONS(['Small', 'Medium', 'Large']) },
      { type: 'radio', label: 'Have you volunteered before?', required: true, options: OPTIONS(['Yes', 'No']) },
      { type: 'text', label: 'Where did you volunteer?' },
      { type: 'checkbox', label: 'Days you can help', options: OPTIONS(['Saturday', 'Sunday']) },
      { type: 'address', label: 'Mailing address', attributes: { showCountry: false } },
      {
        type: 'matrix',
        label: 'Rate these tasks',
        attributes: { rows: ['Cooking', 'Driving'], columns: ['Love it', 'Rather not'] },
      },
      { type: 'product', label: 'Event T-shirts', attributes: { price: 12.5, currency: 'USD', maxQuantity: 5 } },
      { type: 'creditcard', label: 'Card for the T-shirts' },
      {
        type: 'richtext',
        label: 'Note',
        attributes: { html: '<p>All answers are <strong>confidential</strong>.</p>' },
      },
      { type: 'section', label: 'Documents', attributes: { text: 'Attach your certificate and sign below.' } },
      { type: 'file', label: 'First-aid certificate', attributes: { allowedTypes: ['png', 'pdf'] } },
      { type: 'signature', label: 'Signature', required: true },
    ],
  };
}

describe(`hosted forms in Chromium (${dialectName})`, { skip: skipBrowser, timeout: BROWSER_SUITE_MS }, () => {
  let app: TestApp | undefined;
  let owner: TestAccount;
  let browser: Browser | undefined;
  let smtp: SmtpSink | undefined;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    smtp = await startSmtpSink();
    // A person takes longer than a test: the minimum time to submit is off here (test/hosted.test.ts checks it).
    ({ app, browser } = await startWithBrowser(startTestApp({ PUBLIC_SUBMIT_MIN_SECONDS: '0', SMTP_URL: smtp.url })));
    owner = await app.account('Hosted');
  });

  after(async () => {
    await browser?.close();
    await app?.close();
    await smtp?.close();
  });

  async function newPage(options: BrowserContextOptions = {}): Promise<Page> {
    const page = await newBrowserPage(browser!, { viewport: { width: 900, height: 1200 }, ...options });
    // No script of the page may fail, and nothing may open a dialog (the escaping test relies on it).
    page.on('pageerror', (error) => assert.fail(`a script on the page failed: ${error.message}`));
    page.on('dialog', (dialog) => assert.fail(`the page opened a ${dialog.type()} dialog: ${dialog.message()}`));
    return page;
  }

  async function createForm(
    body: unknown,
  ): Promise<{ id: number; path: string; fields: { id: number; label: string }[] }> {
    const res = await owner.post('/forms', body);
    assert.equal(res.status, 200, res.text);
    return { id: res.body.id, path: new URL(res.body.url).pathname, fields: res.body.fields };
  }

  const fieldId = (form: { fields: { id: number; label: string }[] }, label: string) =>
    form.fields.find((f) => f.label === label)!.id;

  async function submissionsOf(formId: number): Promise<any[]> {
    const res = await owner.get(`/forms/${formId}/submissions?data=true&dataFormat=standardized`);
    assert.equal(res.status, 200);
    return res.body.submissions;
  }

  const valueOf = (submission: any, id: number) => submission.data.find((d: any) => d.field === id)?.value;

  async function drawSignature(page: Page, id: number): Promise<void> {
    const box = (await page.locator(`#f${id}`).boundingBox())!;
    await page.mouse.move(box.x + 30, box.y + 100);
    await page.mouse.down();
    for (let i = 1; i <= 12; i++) await page.mouse.move(box.x + 30 + i * 25, box.y + 100 + (i % 2 ? -40 : 30));
    await page.mouse.up();
  }

  it('takes every field type, with logic, pages, an upload and a drawn signature, and the API shows the same values', async () => {
    const form = await createForm(everyFieldType());
    const id = (label: string) => fieldId(form, label);
    // Logic: "Where did you volunteer?" shows when the answer before is Yes.
    const logic = await owner.put(`/forms/${form.id}/fields/${id('Where did you volunteer?')}`, {
      logic: {
        action: 'show',
        conditional: 'all',
        checks: [{ field: id('Have you volunteered before?'), condition: 'equals', option: 'yes' }],
      },
    });
    assert.equal(logic.status, 200, logic.text);

    const page = await newPage();
    const res = await page.goto(`${app!.url}${form.path}`);
    assert.equal(res?.status(), 200);
    const where = page.locator(`#fw-field-${id('Where did you volunteer?')}`);
    await where.waitFor({ state: 'hidden' });
    assert.equal(await page.getByText('Page 1 of 2').isVisible(), true, 'the progress meter shows');
    assert.equal(await page.getByLabel('First-aid certificate').isVisible(), false, 'page two waits');

    // Next with required fields empty: the script's checks stop it, next to the fields.
    await page.getByRole('button', { name: 'Next' }).click();
    await page
      .locator(`#f${id('Email address')}-error`)
      .getByText('This field is required.')
      .waitFor();

    await page.getByLabel('First name').fill('Ada');
    await page.getByLabel('Last name').fill('Lovelace');
    await page.getByLabel('Email address').fill('not an email');
    await page.getByRole('button', { name: 'Next' }).click();
    await page
      .locator(`#f${id('Email address')}-error`)
      .getByText('This field must be an email address.')
      .waitFor();
    assert.equal(await page.getByLabel('Email address').getAttribute('aria-invalid'), 'true');
    await page.getByLabel('Email address').fill('ada@example.com');
    await page.getByLabel('Phone').fill('+44 20 7946 0958');
    await page.getByLabel('Team name').fill('Analytical Engines');
    await page.getByLabel('About you').fill('I like numbers.\nAnd engines.');
    await page.getByLabel('Hours per week').fill('6');
    await page.getByLabel('Start date').fill('2027-03-01');
    await page.getByLabel('Shirt size').selectOption('medium');
    await page.getByLabel('Yes').check();
    await where.waitFor({ state: 'visible' });
    await page.getByLabel('No', { exact: true }).check();
    await where.waitFor({ state: 'hidden' });
    await page.getByLabel('Yes').check();
    await where.waitFor({ state: 'visible' });
    await page.getByLabel('Where did you volunteer?').fill('City library');
    await page.getByLabel('Saturday').check();
    await page.getByLabel('Sunday').check();
    await page.getByLabel('Street address').fill('12 St James Square');
    await page.getByLabel('City').fill('London');
    await page.getByLabel('State / Province').fill('Greater London');
    await page.getByLabel('ZIP / Postal code').fill('SW1Y 4JH');
    await page.getByLabel('Cooking: Love it').check();
    await page.getByLabel('Driving: Rather not').check();
    await page.getByLabel('Event T-shirts').fill('2');
    await page.getByLabel('Card number').fill('4242 4242 4242 4242');
    await page.getByLabel('Expiry month (MM)').fill('12');
    await page.getByLabel('Expiry year (YYYY)').fill('2099');
    await page.getByLabel('Security code').fill('123');
    await page.screenshot({ path: new URL('hosted-form.png', ARTIFACTS).pathname, fullPage: true });

    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('Page 2 of 2').waitFor();
    await page
      .getByLabel('First-aid certificate')
      .setInputFiles({ name: 'certificate.png', mimeType: 'image/png', buffer: PNG });
    await page.getByText('certificate.png (1 KB) attached').waitFor();
    // Submitting without the required signature: refused next to the pad.
    await page.getByRole('button', { name: 'Send my answers' }).click();
    await page
      .locator(`#f${id('Signature')}-error`)
      .getByText('This field is required.')
      .waitFor();
    await drawSignature(page, id('Signature'));
    await page.waitForFunction(
      (name) => (globalThis as any).document.querySelectorAll(`input[name="${name}"]`).length === 1,
      `f${id('Signature')}.fileKey`,
    );
    await page.locator(`#f${id('Signature')}-error:empty`).waitFor({ state: 'attached' });
    await page.screenshot({ path: new URL('hosted-form-page2.png', ARTIFACTS).pathname, fullPage: true });
    const sent = page.waitForResponse(
      (r) => r.request().method() === 'POST' && new URL(r.url()).pathname === form.path,
    );
    await page.getByRole('button', { name: 'Send my answers' }).click();
    assert.equal((await sent).status(), 200);
    await page.getByText('Thank you for signing up!').waitFor();
    await page.getByText('We will be in touch within a week.').waitFor();
    await page.screenshot({ path: new URL('hosted-confirmation.png', ARTIFACTS).pathname, fullPage: true });

    const [submission] = await submissionsOf(form.id);
    assert.ok(submission, 'the submission is there');
    assert.deepEqual(valueOf(submission, id('Your name')), { first: 'Ada', last: 'Lovelace' });
    assert.equal(valueOf(submission, id('Email address')), 'ada@example.com');
    assert.equal(valueOf(submission, id('Phone')), '+44 20 7946 0958');
    assert.equal(valueOf(submission, id('Team name')), 'Analytical Engines');
    assert.equal(valueOf(submission, id('About you')), 'I like numbers.\nAnd engines.');
    assert.equal(valueOf(submission, id('Hours per week')), 6);
    assert.equal(valueOf(submission, id('Start date')), '2027-03-01');
    assert.deepEqual(valueOf(submission, id('Shirt size')), ['medium']);
    assert.equal(valueOf(submission, id('Have you volunteered before?')), 'yes');
    assert.equal(valueOf(submission, id('Where did you volunteer?')), 'City library');
    assert.deepEqual(valueOf(submission, id('Days you can help')), ['saturday', 'sunday']);
    assert.deepEqual(valueOf(submission, id('Mailing address')), {
      address: '12 St James Square',
      city: 'London',
      state: 'Greater London',
      zip: 'SW1Y 4JH',
    });
    assert.deepEqual(valueOf(submission, id('Rate these tasks')), { Cooking: 'Love it', Driving: 'Rather not' });
    assert.equal(valueOf(submission, id('Event T-shirts')), 2);
    assert.deepEqual(valueOf(submission, id('Card for the T-shirts')), {
      brand: 'visa',
      last4: '4242',
      expMonth: '12',
      expYear: '2099',
    });
    const [certificate] = valueOf(submission, id('First-aid certificate'));
    assert.equal(certificate.name, 'certificate.png');
    const file = await app!.request('GET', certificate.url, { token: owner.token });
    assert.equal(file.status, 200);
    const [signature] = valueOf(submission, id('Signature'));
    assert.equal(signature.contentType, 'image/png');
    const png = await fetch(`${app!.url}${signature.url}`, { headers: { authorization: `Bearer ${owner.token}` } });
    const bytes = Buffer.from(await png.arrayBuffer());
    assert.equal(bytes.subarray(1, 4).toString(), 'PNG', 'the signature pad made a PNG');
    assert.ok(bytes.length > 500, 'with a drawing in it');
  });

  it("shows the server's own refusal next to its field (a unique value already taken)", async () => {
    const form = await createForm({
      name: 'Unique',
      fields: [{ type: 'email', label: 'Email', unique: true, required: true }],
    });
    const email = fieldId(form, 'Email');
    assert.equal(
      (await owner.post(`/forms/${form.id}/submissions`, { fields: [{ id: email, value: 'taken@example.com' }] }))
        .status,
      200,
    );
    const page = await newPage();
    await page.goto(`${app!.url}${form.path}`);
    await page.getByLabel('Email').fill('taken@example.com');
    await page.getByRole('button', { name: 'Submit' }).click();
    await page
      .locator(`#f${email}-error`)
      .getByText(/must be unique; this value was already submitted/)
      .waitFor();
    assert.equal(await page.getByLabel('Email').getAttribute('aria-invalid'), 'true');
    assert.equal((await submissionsOf(form.id)).length, 1);
  });

  it('opens a prefill URL with its values', async () => {
    const form = await createForm(everyFieldType());
    const id = (label: string) => fieldId(form, label);
    const res = await owner.post(`/forms/${form.id}/prefill`, {
      fields: [
        { id: id('Your name'), value: { first: 'Grace', last: 'Hopper' } },
        { id: id('Team name'), value: 'COBOL' },
        { id: id('Shirt size'), value: 'large' },
        { id: id('Days you can help'), value: { subvalues: [{ subvalue: 'sunday' }] } },
        { id: id('Have you volunteered before?'), value: 'no' },
      ],
    });
    assert.equal(res.status, 200, res.text);
    const url = new URL(res.body.url);
    assert.equal(url.pathname, form.path);
    const page = await newPage();
    await page.goto(`${app!.url}${url.pathname}${url.search}`);
    assert.equal(await page.getByLabel('First name').inputValue(), 'Grace');
    assert.equal(await page.getByLabel('Last name').inputValue(), 'Hopper');
    assert.equal(await page.getByLabel('Team name').inputValue(), 'COBOL');
    assert.equal(await page.getByLabel('Shirt size').inputValue(), 'large');
    assert.equal(await page.getByLabel('Sunday').isChecked(), true);
    assert.equal(await page.getByLabel('Saturday').isChecked(), false);
    assert.equal(await page.getByLabel('No', { exact: true }).isChecked(), true);
  });

  it('saves a partial, resumes it in another browser and finishes it; the partial is then gone', async () => {
    const form = await createForm({
      name: 'Long application',
      settings: { saveAndResume: true },
      fields: [
        { type: 'text', label: 'Full name', required: true },
        { type: 'email', label: 'Email', required: true },
        { type: 'textarea', label: 'Motivation', required: true },
      ],
    });
    const page = await newPage();
    await page.goto(`${app!.url}${form.path}`);
    await page.getByLabel('Full name').fill('Katherine Johnson');
    await page.getByLabel('Email').fill('kj@example.com');
    await page.getByRole('button', { name: 'Save and continue later' }).click();
    const link = await page.getByLabel('Resume link').inputValue();
    assert.match(link, /\?resume=/);
    await page.context().close();

    const listed = await owner.get(`/form/${form.id}/partialsubmission?data=true`);
    assert.equal(listed.body.total, 1);

    const later = await newPage();
    await later.goto(link);
    assert.equal(await later.getByLabel('Full name').inputValue(), 'Katherine Johnson');
    assert.equal(await later.getByLabel('Email').inputValue(), 'kj@example.com');
    await later.getByLabel('Motivation').fill('Orbits.');
    await later.getByRole('button', { name: 'Submit' }).click();
    await later.getByText('Thank you! Your answers were received.').waitFor();
    const [submission] = await submissionsOf(form.id);
    assert.equal(valueOf(submission, fieldId(form, 'Motivation')), 'Orbits.');
    assert.equal(
      (await owner.get(`/form/${form.id}/partialsubmission`)).body.total,
      0,
      'the partial became the submission',
    );
  });

  it('emails the resume link to the address given on the page, the same link the page shows', async () => {
    const form = await createForm({
      name: 'Scholarship',
      settings: { saveAndResume: true },
      fields: [
        { type: 'email', label: 'Email', required: true },
        { type: 'textarea', label: 'Essay', required: true },
      ],
    });
    const page = await newPage();
    await page.goto(`${app!.url}${form.path}`);
    await page.getByLabel('Email').fill('mary@example.com');
    await page.getByLabel('Essay').fill('A first paragraph.');
    await page.getByRole('button', { name: 'Save and continue later' }).click();
    const link = await page.getByLabel('Resume link').inputValue();
    const address = page.getByLabel('Or email the link to');
    assert.equal(await address.inputValue(), 'mary@example.com', "starts as the form's email field");
    await address.fill('not an address');
    await page.getByRole('button', { name: 'Email me the link' }).click();
    await page.getByText('Enter an email address to send the link to.').waitFor();
    assert.equal(await address.getAttribute('aria-invalid'), 'true');
    await address.fill('mary.w@example.com');
    // Enter in the address sends the link, not the form.
    await address.press('Enter');
    await page.getByText('The link is on its way to mary.w@example.com').waitFor();
    assert.equal((await submissionsOf(form.id)).length, 0, 'the form was not submitted');

    const before = smtp!.messages.length;
    await createWorker(app!.server.ctx, { kinds: jobKinds }).runDue();
    const mails = smtp!.messages.slice(before);
    assert.equal(mails.length, 1);
    assert.deepEqual(mails[0]!.to, ['mary.w@example.com']);
    const shown = new URL(link);
    // PUBLIC_URL is http://forms.test in tests, the page is served at another address: the path and token are the same.
    assert.ok(mails[0]!.decoded.includes(`http://forms.test${shown.pathname}${shown.search}`), mails[0]!.decoded);
    await page.screenshot({ path: new URL('resume-link-email.png', ARTIFACTS).pathname, fullPage: true });
  });

  it('works without JavaScript: a plain HTML post, errors on the page, then the confirmation', async () => {
    const form = await createForm({
      name: 'Plain',
      fields: [
        { type: 'text', label: 'Name', required: true },
        { type: 'number', label: 'Age', attributes: { min: 18 } },
        // A rule that the browser does not check by itself: the server's message comes back on the page.
        { type: 'checkbox', label: 'Topics', options: OPTIONS(['Maths', 'Music']), attributes: { minSelected: 2 } },
      ],
    });
    const page = await newPage({ javaScriptEnabled: false });
    await page.goto(`${app!.url}${form.path}`);
    await page.getByLabel('Name').fill('Mary');
    await page.getByLabel('Age').fill('40');
    await page.getByLabel('Music').check();
    await page.getByRole('button', { name: 'Submit' }).click();
    await page
      .locator(`#f${fieldId(form, 'Topics')}-error`)
      .getByText('Needs at least 2 options.')
      .waitFor();
    assert.equal(await page.getByLabel('Name').inputValue(), 'Mary', 'the answers are kept');
    assert.equal(await page.getByLabel('Music').isChecked(), true);
    await page.getByLabel('Maths').check();
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.getByText('Thank you! Your answers were received.').waitFor();
    const [submission] = await submissionsOf(form.id);
    assert.equal(valueOf(submission, fieldId(form, 'Name')), 'Mary');
    assert.equal(valueOf(submission, fieldId(form, 'Age')), 40);
    assert.deepEqual(valueOf(submission, fieldId(form, 'Topics')), ['maths', 'music']);
  });

  it('sends the values of read-only choices, with and without JavaScript', async () => {
    const form = await createForm({
      name: 'Read-only choices',
      fields: [
        {
          type: 'radio',
          label: 'Plan',
          required: true,
          readOnly: true,
          defaultValue: 'b',
          options: OPTIONS(['A', 'B']),
        },
        { type: 'checkbox', label: 'Extras', readOnly: true, defaultValue: ['x'], options: OPTIONS(['X', 'Y']) },
        { type: 'text', label: 'Name' },
      ],
    });
    for (const javaScriptEnabled of [false, true]) {
      const page = await newPage({ javaScriptEnabled });
      await page.goto(`${app!.url}${form.path}`);
      assert.equal(await page.getByLabel('B').isDisabled(), true, 'a person cannot change it');
      await page.getByLabel('Name').fill(`Ann ${javaScriptEnabled}`);
      await page.getByRole('button', { name: 'Submit' }).click();
      await page.getByText('Thank you! Your answers were received.').waitFor();
      await page.context().close();
    }
    const submissions = await submissionsOf(form.id);
    assert.equal(submissions.length, 2);
    for (const submission of submissions) {
      assert.equal(valueOf(submission, fieldId(form, 'Plan')), 'b');
      assert.deepEqual(valueOf(submission, fieldId(form, 'Extras')), ['x']);
    }
  });

  it('keeps hostile text inert in the page, the embed HTML and the confirmation', async () => {
    const evil = `<script>alert(1)</script>"onmouseover="alert(2)" javascript:alert(3) <img src=x onerror=alert(4)>`;
    const form = await createForm({
      name: `Form ${evil}`,
      submitButtonTitle: `Go ${evil}`.slice(0, 100),
      settings: { description: evil, successMessage: `Done ${evil}`, closedMessage: evil },
      fields: [
        {
          type: 'text',
          label: `Label ${evil}`,
          description: `Hint ${evil}`,
          defaultValue: evil,
          attributes: { placeholder: evil.slice(0, 200) },
        },
        {
          type: 'select',
          label: `Pick ${evil}`,
          options: [
            { label: evil, value: 'a' },
            { label: 'B', value: `b ${evil}` },
          ],
        },
        { type: 'radio', label: `Radio ${evil}`, options: [{ label: evil, value: evil }] },
        { type: 'matrix', label: 'Matrix', attributes: { rows: [evil], columns: [evil] } },
        {
          type: 'richtext',
          label: 'Rich',
          attributes: { html: `<p onclick="alert(5)">Hi</p><a href="javascript:alert(6)">link</a>${evil}` },
        },
        { type: 'section', label: `Section ${evil}`, attributes: { text: evil } },
      ],
    });
    const inert = async (page: Page, what: string) => {
      const found = await page.evaluate(() => ({
        handlers: [...(globalThis as any).document.querySelectorAll('*')].filter((el: any) =>
          [...el.attributes].some((a) => a.name.startsWith('on')),
        ).length,
        scripts: [...(globalThis as any).document.querySelectorAll('script')].filter(
          (s) => s.type !== 'application/json' && !s.src.includes('/assets/form-'),
        ).length,
        images: (globalThis as any).document.querySelectorAll('img').length,
        jsLinks: [...(globalThis as any).document.querySelectorAll('a')].filter((a) =>
          a.href.trim().toLowerCase().startsWith('javascript:'),
        ).length,
      }));
      assert.deepEqual(found, { handlers: 0, scripts: 0, images: 0, jsLinks: 0 }, what);
    };
    const page = await newPage();
    await page.goto(`${app!.url}${form.path}`);
    await page.getByText(`Hint ${evil}`).waitFor();
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), `Form ${evil}`, 'shown as text');
    assert.equal(await page.getByRole('textbox', { name: `Label ${evil}` }).inputValue(), evil);
    await page.getByRole('textbox', { name: `Label ${evil}` }).hover();
    await inert(page, 'the page');

    const embed = await owner.get(`/forms/${form.id}/html`);
    assert.equal(embed.status, 200);
    const host = await newPage();
    await host.setContent(`<!doctype html><title>Host</title><main>${embed.body.html}</main>`);
    await inert(host, 'the embed HTML');

    await page.getByRole('button', { name: 'Next' }).click();
    await inert(page, 'the second page');
    await page.getByRole('button', { name: /^Go / }).click();
    await page.getByText(`Done ${evil}`).waitFor();
    await inert(page, 'the confirmation');
    const plain = await newPage({ javaScriptEnabled: false });
    await plain.goto(`${app!.url}${form.path}`);
    await plain.getByRole('button', { name: /^Go / }).click();
    await plain.getByText(`Done ${evil}`).waitFor();
    await inert(plain, 'the confirmation page');
  });

  it('has no serious or critical accessibility violations (axe-core) on a form with every field type', async () => {
    const form = await createForm(everyFieldType());
    // axe is injected as an inline script, which the page's CSP rightly refuses: bypassed for this check only.
    const page = await newPage({ bypassCSP: true });
    await page.goto(`${app!.url}${form.path}`);
    await page.addScriptTag({ content: AXE });
    // The page as it opens, then with the script's errors shown, then the second page.
    const violations: string[] = [];
    for (let n = 0; n < 3; n++) {
      const result = await page.evaluate(async () => {
        const axe = (
          globalThis as unknown as {
            axe: {
              run(): Promise<{
                violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[];
              }>;
            };
          }
        ).axe;
        return (await axe.run()).violations.map((v) => ({
          id: v.id,
          impact: v.impact,
          help: v.help,
          targets: v.nodes.map((x) => x.target.join(' ')),
        }));
      });
      for (const v of result)
        if (v.impact === 'serious' || v.impact === 'critical')
          violations.push(`${v.id} (${v.impact}): ${v.help} at ${v.targets.join(', ')}`);
      if (n === 0) await page.getByRole('button', { name: 'Next' }).click();
      if (n === 1) {
        await page.getByLabel('First name').fill('Ada');
        await page.getByLabel('Last name').fill('Lovelace');
        await page.getByLabel('Email address').fill('ada@example.com');
        await page.getByLabel('Yes').check();
        await page.getByRole('button', { name: 'Next' }).click();
        await page.getByText('Page 2 of 2').waitFor();
      }
    }
    assert.deepEqual(violations, []);
  });
});
