/**
 * Services take the request's caller as one object and the ids it names by name, so that
 * ids of different things cannot trade places unnoticed. The lines marked @ts-expect-error
 * are the mistakes that positional numbers let through: `npm run typecheck` fails if any of
 * them compiles. The test itself calls the services with named ids, in either order.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AppContext } from '../src/context.js';
import { getField, updateField } from '../src/modules/fields/service.js';
import { getFolder } from '../src/modules/folders/service.js';
import { getForm } from '../src/modules/forms/service.js';
import type { Caller } from '../src/modules/permissions/caller.js';
import type { SubmissionsDeps } from '../src/modules/submissions/definitions.js';
import { getSubmission, openSubmissionFile } from '../src/modules/submissions/query.js';
import { deleteSubmission } from '../src/modules/submissions/write.js';
import { revokeToken } from '../src/modules/tokens/service.js';
import type { TokenOwner } from '../src/modules/accounts/repository.js';
import { issueUploadUrls } from '../src/modules/uploads/service.js';
import { deleteUser, setPermission } from '../src/modules/users/service.js';
import { NotFoundError } from '../src/errors.js';
import { dialectName, startTestApp, type TestAccount, type TestApp } from './support/helpers.js';

/** Compiled, never run: each marked call is refused by the compiler. */
export function swappedIdsDoNotCompile(ctx: AppContext, deps: SubmissionsDeps, caller: Caller, who: TokenOwner): void {
  // @ts-expect-error an account id and a form id in a row
  void getForm(ctx, caller.accountId, 7, false);
  // @ts-expect-error the ids where the caller goes, and the caller where the ids go
  void getField(ctx, { formId: 7, fieldId: 8 }, caller);
  // @ts-expect-error a form and a field id as two numbers
  void getField(ctx, caller, 7, 8);
  // @ts-expect-error a form id where a submission is named
  void getSubmission(deps, caller, { formId: 7 });
  // @ts-expect-error a field id where a form is named
  void updateField(ctx, caller, { fieldId: 8 }, {});
  // @ts-expect-error a folder named as a form
  void getFolder(ctx, caller, { formId: 7 });
  // @ts-expect-error a submission id and a field id as numbers
  void openSubmissionFile(deps, caller, 9, 8, 0);
  // @ts-expect-error a submission's id as a bare number
  void deleteSubmission(deps, caller, 9);
  // @ts-expect-error the user and the form of a permission as numbers
  void setPermission(ctx, caller, 3, 7, 'view');
  // @ts-expect-error a user id where the caller goes
  void deleteUser(ctx.db, caller.userId, { userId: 3 });
  // @ts-expect-error a token id without its user
  void revokeToken(ctx.db, who, { tokenId: 4 }, 0);
  // @ts-expect-error the field's ids as numbers
  void issueUploadUrls(ctx, caller, 7, 8, ['a.pdf']);

  // The same calls with named ids compile.
  void getForm(ctx, caller, { formId: 7 }, false);
  void getField(ctx, caller, { fieldId: 8, formId: 7 });
  void openSubmissionFile(deps, caller, { submissionId: 9 }, { fieldId: 8, index: 0 });
  void setPermission(ctx, caller, { userId: 3, formId: 7 }, 'view');
  void revokeToken(ctx.db, who, { userId: 3, tokenId: 4 }, 0);
}

describe(`services take the caller and named ids (${dialectName})`, () => {
  let app: TestApp;
  let a: TestAccount;
  let caller: Caller;
  let formId: number;
  let fieldId: number;
  before(async () => {
    app = await startTestApp();
    a = await app.account();
    caller = { accountId: a.accountId, userId: a.userId, role: 'owner', tokenId: 0 };
    const form = (
      await a.post('/forms', {
        name: 'Named',
        fields: ['One', 'Two', 'Three'].map((label) => ({ type: 'text', label })),
      })
    ).body;
    formId = form.id;
    fieldId = form.fields[2].id;
    assert.notEqual(formId, fieldId, 'the test needs ids that differ');
  });
  after(() => app.close());

  it('finds the field by name whatever the order of the keys', async () => {
    const ctx = app.server.ctx;
    assert.equal(typeof swappedIdsDoNotCompile, 'function');
    assert.equal((await getField(ctx, caller, { formId, fieldId })).id, fieldId);
    assert.equal((await getField(ctx, caller, { fieldId, formId })).id, fieldId);
  });

  it("finds nothing when one id is given as the other's", async () => {
    const ctx = app.server.ctx;
    await assert.rejects(getField(ctx, caller, { formId: fieldId, fieldId: formId }), NotFoundError);
  });

  it("acts in the caller's account only", async () => {
    const other = await app.account();
    const outsider: Caller = { accountId: other.accountId, userId: other.userId, role: 'owner', tokenId: 0 };
    await assert.rejects(getForm(app.server.ctx, outsider, { formId }, false), NotFoundError);
    assert.equal((await getForm(app.server.ctx, caller, { formId }, false)).id, formId);
  });
});
