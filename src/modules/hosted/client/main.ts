/**
 * The hosted form's script, bundled for the browser from this file (hosted/bundle.ts). It
 * runs the service's own rules: logic and value checks come from submissions/values.ts and
 * the reading of inputs from hosted/form-model.ts, the same code the server runs.
 */
import { TYPE_RULES } from '../../fields/types.js';
import { EMAIL, readValue, ValueError, visibleFields, type StoredValue } from '../../submissions/values.js';
import {
  collectFields,
  fieldMessage,
  inputName,
  withDefaults,
  type FieldInput,
  type PageField,
} from '../form-model.js';

interface Definition {
  viewKey: string;
  base: string;
  saveAndResume: boolean;
  fields: PageField[];
}

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

async function send(url: string, body: unknown): Promise<Reply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
  });
  let parsed: Record<string, unknown> = {};
  try {
    parsed = (await res.json()) as Record<string, unknown>;
  } catch {
    parsed = { message: 'The service could not be reached. Please try again.' };
  }
  return { status: res.status, body: parsed };
}

function messageOf(reply: Reply, fallback: string): string {
  const m = reply.body.message ?? reply.body.error;
  return typeof m === 'string' ? m : fallback;
}

class HostedForm {
  private readonly def: Definition;
  private readonly pages: HTMLElement[];
  private page = 0;
  private started = false;
  private busy = false;
  private readonly url: string;
  private resumeToken: string | undefined;

  constructor(private readonly form: HTMLFormElement) {
    const json = form.querySelector<HTMLScriptElement>('script.fw-definition')!.textContent ?? '{}';
    const parsed = JSON.parse(json) as Omit<Definition, 'fields'> & { fields: Partial<PageField>[] };
    // Options the definition leaves out are the page's controls' (form-model.ts, optionsInControls).
    const fields = parsed.fields.map((f) =>
      f.options === undefined && f.id !== undefined && f.type !== undefined && TYPE_RULES[f.type].options
        ? { ...f, options: this.optionsOfControls(f.id) }
        : f,
    );
    this.def = { ...parsed, fields: fields.map(withDefaults) };
    this.url = `${this.def.base}/f/${encodeURIComponent(this.def.viewKey)}`;
    this.pages = [...form.querySelectorAll<HTMLElement>('.fw-page')];
    this.resumeToken = form.querySelector<HTMLInputElement>('input[name=_resume]')?.value;
    form.noValidate = true;
    form.addEventListener('input', () => this.changed());
    form.addEventListener('change', () => this.changed());
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.submit();
    });
    this.button('.fw-next')?.addEventListener('click', () => this.next());
    this.button('.fw-back')?.addEventListener('click', () => this.show(this.page - 1, true));
    const save = this.button('.fw-save');
    if (save) {
      save.hidden = false;
      save.addEventListener('click', () => void this.save());
    }
    for (const f of this.def.fields) {
      if (f.type === 'file') this.setUpFile(f);
      if (f.type === 'signature') this.setUpSignature(f);
    }
    void this.ensureToken();
    this.applyLogic();
    // Server errors put their page first; otherwise start at the first page.
    const invalid = form.querySelector('[aria-invalid=true]');
    this.show(invalid ? this.pageOf(invalid) : 0, false);
    if (invalid) form.querySelector<HTMLElement>('#fw-summary')?.focus();
  }

  /** Embedded HTML carries no page token (it is kept by other sites): one is fetched when the script starts. */
  private async ensureToken(): Promise<void> {
    const input = this.form.querySelector<HTMLInputElement>('input[name=_fw]');
    if (!input || input.value !== '') return;
    try {
      const res = await fetch(`${this.url}/token`, { headers: { accept: 'application/json' } });
      if (res.ok) input.value = String(((await res.json()) as { loadToken?: string }).loadToken ?? '');
    } catch {
      // Sent without one, the form comes back filled in to be sent again.
    }
  }

  /** The options of a select, radio or checkbox field, as its controls show them. */
  private optionsOfControls(id: number): { label: string; value: string }[] {
    const select = this.form.querySelector<HTMLSelectElement>(`select[name="${inputName(id)}"]`);
    if (select)
      return [...select.options]
        .filter((o) => o.value !== '')
        .map((o) => ({ label: o.textContent ?? '', value: o.value }));
    // Not the hidden inputs that carry a read-only choice's value (render.ts).
    return [...this.form.querySelectorAll<HTMLInputElement>(`input[name="${inputName(id)}"]:not([type=hidden])`)].map(
      (input) => ({
        label: input.labels?.[0]?.textContent ?? '',
        value: input.value,
      }),
    );
  }

  private button(selector: string): HTMLButtonElement | null {
    return this.form.querySelector<HTMLButtonElement>(selector);
  }

  private get(name: string): string[] {
    const out: string[] = [];
    for (const el of this.form.querySelectorAll<HTMLInputElement>(`[name="${CSS.escape(name)}"]`)) {
      // As a plain post reads the form: a disabled control (a read-only choice) sends nothing,
      // and the hidden input beside it sends its value.
      if (el.disabled) continue;
      if ((el.type === 'radio' || el.type === 'checkbox') && !el.checked) continue;
      if (el instanceof HTMLSelectElement) {
        for (const o of el.selectedOptions) out.push(o.value);
        continue;
      }
      out.push(el.value);
    }
    return out;
  }

  private inputs(): FieldInput[] {
    return collectFields(this.def.fields, (name) => this.get(name));
  }

  /** The values as the server would read them; values it would refuse count as empty for logic. */
  private values(inputs: FieldInput[]): Map<number, StoredValue> {
    const byId = new Map(this.def.fields.map((f) => [f.id, f]));
    const values = new Map<number, StoredValue>();
    // eslint-disable-next-line no-restricted-properties -- the browser's clock: the person's own, read for card expiry only
    const now = Date.now();
    for (const input of inputs) {
      const field = byId.get(input.id);
      if (!field || field.type === 'file' || field.type === 'signature') {
        if (field)
          values.set(
            input.id,
            (input.value as string[]).map((k) => ({ fileKey: k, name: k, size: 0, contentType: '' })),
          );
        continue;
      }
      try {
        const v = readValue(field, input.value, now);
        if (v !== null) values.set(input.id, v);
      } catch {
        // Logic sees no value where the server would refuse one.
      }
    }
    return values;
  }

  private visible(): Set<number> {
    return visibleFields(this.def.fields, this.values(this.inputs()));
  }

  private changed(): void {
    if (!this.started) {
      this.started = true;
      void send(`${this.url}/events`, { type: 'start' }).catch(() => undefined);
    }
    this.applyLogic();
    this.clearFixed();
  }

  /** Errors shown earlier go as soon as their field passes; new ones wait for Next or submit. */
  private clearFixed(): void {
    const shown = this.def.fields.filter((f) => this.form.querySelector(`#f${f.id}-error`)?.textContent);
    if (shown.length === 0) return;
    const problems = this.problems();
    const kept = new Map<number, string>();
    for (const f of shown) {
      const now = problems.get(f.id);
      if (now) kept.set(f.id, this.form.querySelector(`#f${f.id}-error`)!.textContent ?? now);
    }
    if (kept.size === shown.length) return;
    this.showErrors(kept);
  }

  private applyLogic(): void {
    const visible = this.visible();
    for (const f of this.def.fields) {
      const el = this.form.querySelector<HTMLElement>(`#fw-field-${f.id}`);
      if (!el || el.dataset.alwaysHidden) continue;
      el.hidden = !visible.has(f.id);
    }
  }

  private pageOf(el: Element): number {
    const page = el.closest('.fw-page');
    return Math.max(0, this.pages.indexOf(page as HTMLElement));
  }

  private show(index: number, focus: boolean): void {
    this.page = Math.min(Math.max(index, 0), this.pages.length - 1);
    this.pages.forEach((p, i) => (p.hidden = i !== this.page));
    const last = this.page === this.pages.length - 1;
    const paged = this.pages.length > 1;
    this.button('.fw-back')!.hidden = !paged || this.page === 0;
    this.button('.fw-next')!.hidden = !paged || last;
    this.button('.fw-submit')!.hidden = paged && !last;
    const progress = this.form.querySelector<HTMLElement>('.fw-progress');
    if (progress) {
      progress.hidden = false;
      progress.querySelector('progress')!.value = this.page + 1;
      progress.querySelector('.fw-progress-label')!.textContent = `Page ${this.page + 1} of ${this.pages.length}`;
    }
    if (focus) {
      const first = this.pages[this.page]!.querySelector<HTMLElement>(
        '.fw-field:not([hidden]) input:not([type=hidden]), .fw-field:not([hidden]) select, .fw-field:not([hidden]) textarea, .fw-field:not([hidden]) canvas',
      );
      first?.focus();
    }
  }

  /** The problems the server would find (values and required), per field id. */
  private problems(onlyPage?: number): Map<number, string> {
    const inputs = this.inputs();
    const given = new Map(inputs.map((i) => [i.id, i.value]));
    const visible = this.visible();
    // eslint-disable-next-line no-restricted-properties -- the browser's clock, as above
    const now = Date.now();
    const problems = new Map<number, string>();
    for (const f of this.def.fields) {
      if (!TYPE_RULES[f.type].input || !visible.has(f.id) || f.hidden) continue;
      const el = this.form.querySelector(`#fw-field-${f.id}`);
      if (onlyPage !== undefined && el && this.pageOf(el) !== onlyPage) continue;
      const raw = given.get(f.id);
      if (raw === undefined) {
        if (f.required) problems.set(f.id, 'This field is required.');
        continue;
      }
      if (f.type === 'file' || f.type === 'signature') continue;
      try {
        readValue(f, raw, now);
      } catch (error) {
        if (error instanceof ValueError) problems.set(f.id, fieldMessage(f, error.message));
        else throw error;
      }
    }
    return problems;
  }

  private showErrors(problems: Map<number, string>, summary?: string): void {
    for (const f of this.def.fields) {
      const slot = this.form.querySelector<HTMLElement>(`#f${f.id}-error`);
      if (!slot) continue;
      const message = problems.get(f.id) ?? '';
      slot.textContent = message;
      const wrapper = this.form.querySelector(`#fw-field-${f.id}`)!;
      for (const input of wrapper.querySelectorAll('input:not([type=hidden]), select, textarea, .fw-choices, canvas')) {
        if (message) input.setAttribute('aria-invalid', 'true');
        else input.removeAttribute('aria-invalid');
      }
    }
    const box = this.form.querySelector<HTMLElement>('#fw-summary')!;
    if (problems.size === 0 && !summary) {
      box.hidden = true;
      box.textContent = '';
      return;
    }
    box.hidden = false;
    box.textContent = '';
    const p = document.createElement('p');
    p.textContent =
      summary ?? `Please correct ${problems.size === 1 ? 'the field' : `the ${problems.size} fields`} marked below.`;
    box.append(p);
    if (problems.size > 0) {
      const ul = document.createElement('ul');
      for (const [id, message] of problems) {
        const f = this.def.fields.find((x) => x.id === id);
        const li = document.createElement('li');
        const a = document.createElement('a');
        a.href = `#fw-field-${id}`;
        a.textContent = `${f?.label ?? `Field ${id}`}: ${message}`;
        a.addEventListener('click', (event) => {
          event.preventDefault();
          this.focusField(id);
        });
        li.append(a);
        ul.append(li);
      }
      box.append(ul);
    }
  }

  private focusField(id: number): void {
    const wrapper = this.form.querySelector<HTMLElement>(`#fw-field-${id}`);
    if (!wrapper) return;
    this.show(this.pageOf(wrapper), false);
    wrapper.querySelector<HTMLElement>('input:not([type=hidden]), select, textarea, canvas')?.focus();
  }

  private next(): void {
    const problems = this.problems(this.page);
    this.showErrors(problems);
    if (problems.size > 0) {
      this.focusField([...problems.keys()][0]!);
      return;
    }
    this.show(this.page + 1, true);
  }

  private hiddenValue(name: string): string {
    return this.form.querySelector<HTMLInputElement>(`input[name=${name}]`)?.value ?? '';
  }

  private async submit(): Promise<void> {
    if (this.busy) return;
    const problems = this.problems();
    this.showErrors(problems);
    if (problems.size > 0) {
      this.focusField([...problems.keys()][0]!);
      return;
    }
    const visible = this.visible();
    const fields = this.inputs().filter((i) => visible.has(i.id));
    this.setBusy(true);
    try {
      const reply = await send(this.url, {
        fields,
        _fw: this.hiddenValue('_fw'),
        website: this.hiddenValue('website'),
        ...(this.resumeToken ? { _resume: this.resumeToken } : {}),
      });
      if (reply.status === 200) return this.done(reply.body);
      const fieldErrors = (reply.body.fieldErrors ?? {}) as Record<string, string>;
      const map = new Map(Object.entries(fieldErrors).map(([k, v]) => [Number(k), v]));
      this.showErrors(map, map.size > 0 ? undefined : messageOf(reply, 'The form could not be sent.'));
      if (map.size > 0) this.focusField([...map.keys()][0]!);
      else this.form.querySelector<HTMLElement>('#fw-summary')?.focus();
    } catch {
      this.showErrors(new Map(), 'The form could not be sent: check your connection and try again.');
    } finally {
      this.setBusy(false);
    }
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    for (const b of this.form.querySelectorAll<HTMLButtonElement>('button')) b.disabled = busy;
  }

  private done(body: Record<string, unknown>): void {
    if (typeof body.redirectUrl === 'string' && /^https?:\/\//.test(body.redirectUrl)) {
      window.location.assign(body.redirectUrl);
      return;
    }
    const box = document.createElement('div');
    box.className = 'fw-done';
    box.setAttribute('role', 'status');
    box.tabIndex = -1;
    const check = document.createElement('div');
    check.className = 'fw-check';
    check.setAttribute('aria-hidden', 'true');
    check.textContent = '✓';
    box.append(check);
    for (const text of String(body.message ?? '').split(/\n\s*\n/)) {
      const p = document.createElement('p');
      p.textContent = text;
      box.append(p);
    }
    this.form.replaceWith(box);
    box.focus();
  }

  private async save(): Promise<void> {
    if (this.busy) return;
    const box = this.form.querySelector<HTMLElement>('.fw-resume')!;
    this.setBusy(true);
    try {
      const reply = await send(`${this.url}/partial`, {
        fields: this.inputs(),
        website: this.hiddenValue('website'),
        ...(this.resumeToken ? { _resume: this.resumeToken } : {}),
      });
      box.hidden = false;
      box.textContent = '';
      if (reply.status !== 200) {
        box.textContent = messageOf(reply, 'Your progress could not be saved.');
        return;
      }
      this.resumeToken = String(reply.body.resumeToken);
      // resumeUrl is relative to the service: embedded HTML on another site has the service's base.
      const resumeUrl = String(reply.body.resumeUrl);
      const link = this.def.base ? `${this.def.base}${resumeUrl}` : new URL(resumeUrl, window.location.href).toString();
      const p = document.createElement('p');
      p.textContent = 'Your answers are saved. Use this link to come back and finish later:';
      const label = document.createElement('label');
      label.htmlFor = `fw-resume-${this.def.viewKey}`;
      label.textContent = 'Resume link';
      label.className = 'fw-visually-hidden';
      const input = document.createElement('input');
      input.type = 'text';
      input.readOnly = true;
      input.id = `fw-resume-${this.def.viewKey}`;
      input.className = 'fw-resume-link';
      input.value = link;
      box.append(p, label, input);
      const emailField = this.def.fields.find((f) => f.type === 'email');
      if (emailField) box.append(this.emailLinkControl(emailField.id));
      input.focus();
      input.select();
    } finally {
      this.setBusy(false);
    }
  }

  /** "Email me this link": the address starts as the form's email field's value. */
  private emailLinkControl(emailFieldId: number): HTMLElement {
    const group = document.createElement('div');
    group.className = 'fw-resume-email';
    const id = `fw-resume-email-${this.def.viewKey}`;
    const label = document.createElement('label');
    label.htmlFor = id;
    label.textContent = 'Or email the link to';
    const address = document.createElement('input');
    address.type = 'email';
    address.id = id;
    address.autocomplete = 'email';
    address.value = this.form.querySelector<HTMLInputElement>(`#fw-field-${emailFieldId} input`)?.value ?? '';
    const status = document.createElement('p');
    status.className = 'fw-resume-email-status';
    status.id = `${id}-status`;
    status.setAttribute('aria-live', 'polite');
    address.setAttribute('aria-describedby', status.id);
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'fw-button fw-secondary fw-send-link';
    button.textContent = 'Email me the link';
    const go = () => void this.emailLink(address, status);
    button.addEventListener('click', go);
    // Enter in the address sends the link, not the form.
    address.addEventListener('keydown', (event) => {
      if (event.key !== 'Enter') return;
      event.preventDefault();
      go();
    });
    group.append(label, address, button, status);
    return group;
  }

  /** Saves again (the values as they are now) and asks for the link to go to the address, in one request. */
  private async emailLink(address: HTMLInputElement, status: HTMLElement): Promise<void> {
    if (this.busy) return;
    const to = address.value.trim();
    if (!EMAIL.test(to)) {
      status.textContent = 'Enter an email address to send the link to.';
      address.setAttribute('aria-invalid', 'true');
      address.focus();
      return;
    }
    address.removeAttribute('aria-invalid');
    this.setBusy(true);
    try {
      const reply = await send(`${this.url}/partial`, {
        fields: this.inputs(),
        website: this.hiddenValue('website'),
        ...(this.resumeToken ? { _resume: this.resumeToken } : {}),
        resumeEmail: to,
      });
      if (reply.status !== 200) {
        status.textContent = messageOf(reply, 'The link could not be sent.');
        return;
      }
      this.resumeToken = String(reply.body.resumeToken);
      status.textContent = `The link is on its way to ${to}. Your latest answers are saved too.`;
    } finally {
      this.setBusy(false);
    }
  }

  private keysBox(fieldId: number): HTMLElement {
    return this.form.querySelector<HTMLElement>(`#fw-field-${fieldId} .fw-file, #fw-field-${fieldId} .fw-signature`)!;
  }

  private setKeys(fieldId: number, keys: string[], append: boolean): void {
    const box = this.keysBox(fieldId);
    if (!append) for (const el of box.querySelectorAll(`input[name="${inputName(fieldId, 'fileKey')}"]`)) el.remove();
    for (const key of keys) {
      const hidden = document.createElement('input');
      hidden.type = 'hidden';
      hidden.name = inputName(fieldId, 'fileKey');
      hidden.value = key;
      box.append(hidden);
    }
    this.changed();
  }

  /** Gets upload URLs for the files, sends each file to its URL, and returns the fileKeys. */
  private async upload(fieldId: number, files: { name: string; body: Blob }[]): Promise<string[]> {
    const reply = await send(`${this.url}/uploads`, { fieldId, filenames: files.map((f) => f.name) });
    if (reply.status !== 200) throw new Error(messageOf(reply, 'The file could not be uploaded.'));
    const uploads = reply.body.uploads as { fileKey: string; uploadUrl: string }[];
    await Promise.all(
      uploads.map(async (u, i) => {
        const target = new URL(u.uploadUrl, this.def.base || window.location.href).toString();
        const res = await fetch(target, { method: 'PUT', body: files[i]!.body });
        if (!res.ok) {
          let message = 'The file could not be uploaded.';
          try {
            message = String(((await res.json()) as { error?: string }).error ?? message);
          } catch {
            // Not JSON (a bucket's XML error): the general message.
          }
          throw new Error(message);
        }
      }),
    );
    return uploads.map((u) => u.fileKey);
  }

  private setUpFile(f: PageField): void {
    const input = this.form.querySelector<HTMLInputElement>(`#${inputName(f.id)}`);
    if (!input) return;
    input.disabled = false;
    const list = this.keysBox(f.id).querySelector('.fw-files')!;
    const error = this.form.querySelector<HTMLElement>(`#f${f.id}-error`)!;
    input.addEventListener('change', () => {
      const files = [...(input.files ?? [])];
      if (files.length === 0) return;
      error.textContent = '';
      list.textContent = '';
      const status = document.createElement('li');
      status.textContent = `Uploading ${files.map((x) => x.name).join(', ')}…`;
      list.append(status);
      this.upload(
        f.id,
        files.map((x) => ({ name: x.name, body: x })),
      )
        .then((keys) => {
          this.setKeys(f.id, keys, false);
          list.textContent = '';
          files.forEach((x, i) => {
            const li = document.createElement('li');
            li.textContent = `${x.name} (${Math.max(1, Math.round(x.size / 1024))} KB) attached`;
            const remove = document.createElement('button');
            remove.type = 'button';
            remove.className = 'fw-button fw-secondary';
            remove.textContent = `Remove ${x.name}`;
            remove.addEventListener('click', () => {
              const keep = this.get(inputName(f.id, 'fileKey')).filter((k) => k !== keys[i]);
              this.setKeys(f.id, keep, false);
              li.remove();
              if (keep.length === 0) input.value = '';
            });
            li.append(remove);
            list.append(li);
          });
        })
        .catch((e: unknown) => {
          list.textContent = '';
          input.value = '';
          this.setKeys(f.id, [], false);
          error.textContent = e instanceof Error ? e.message : 'The file could not be uploaded.';
        });
    });
  }

  private setUpSignature(f: PageField): void {
    const canvas = this.form.querySelector<HTMLCanvasElement>(`#${CSS.escape(inputName(f.id))}`);
    if (!canvas) return;
    const typed = this.form.querySelector<HTMLInputElement>(`#${CSS.escape(inputName(f.id, 'typed'))}`)!;
    const g = canvas.getContext('2d')!;
    const error = this.form.querySelector<HTMLElement>(`#f${f.id}-error`)!;
    let drawing = false;
    let inked = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let version = 0;
    const point = (e: PointerEvent) => {
      const r = canvas.getBoundingClientRect();
      return [
        ((e.clientX - r.left) * canvas.width) / r.width,
        ((e.clientY - r.top) * canvas.height) / r.height,
      ] as const;
    };
    const clear = () => {
      g.clearRect(0, 0, canvas.width, canvas.height);
      inked = false;
      version++;
      this.setKeys(f.id, [], false);
    };
    const store = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        const mine = ++version;
        canvas.toBlob((blob) => {
          if (!blob || mine !== version) return;
          this.upload(f.id, [{ name: 'signature.png', body: blob }])
            .then((keys) => {
              if (mine === version) this.setKeys(f.id, keys, false);
            })
            .catch((e: unknown) => {
              error.textContent = e instanceof Error ? e.message : 'The signature could not be saved.';
            });
        }, 'image/png');
      }, 300);
    };
    g.lineWidth = 2.5;
    g.lineCap = 'round';
    g.lineJoin = 'round';
    g.strokeStyle = '#1c2333';
    canvas.addEventListener('pointerdown', (e) => {
      drawing = true;
      canvas.setPointerCapture(e.pointerId);
      const [x, y] = point(e);
      g.beginPath();
      g.moveTo(x, y);
      g.lineTo(x + 0.1, y + 0.1);
      g.stroke();
      inked = true;
    });
    canvas.addEventListener('pointermove', (e) => {
      if (!drawing) return;
      const [x, y] = point(e);
      g.lineTo(x, y);
      g.stroke();
    });
    const end = () => {
      if (!drawing) return;
      drawing = false;
      if (inked) {
        typed.value = '';
        store();
      }
    };
    canvas.addEventListener('pointerup', end);
    canvas.addEventListener('pointercancel', end);
    typed.addEventListener('input', () => {
      g.clearRect(0, 0, canvas.width, canvas.height);
      const name = typed.value.trim();
      if (name === '') {
        clear();
        return;
      }
      g.fillStyle = '#1c2333';
      g.font = 'italic 52px "Brush Script MT", "Segoe Script", cursive';
      g.textBaseline = 'middle';
      g.fillText(name, 24, canvas.height / 2, canvas.width - 48);
      inked = true;
      store();
    });
    this.keysBox(f.id)
      .querySelector('.fw-pad-clear')!
      .addEventListener('click', () => {
        typed.value = '';
        clear();
      });
  }
}

for (const form of document.querySelectorAll<HTMLFormElement>('form[data-fw-form]')) new HostedForm(form);
