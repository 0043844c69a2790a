import js from '@eslint/js';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', '.bench/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    plugins: { 'import-x': importX },
    settings: {
      ...importX.flatConfigs.typescript.settings,
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      eqeqeq: ['error', 'smart'],
      // A cycle makes the order of module start-up matter and hides which layer owns what
      // (docs/architecture.md); type-only imports count too, as they tie the layers together.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // The outbox and the worker run job kinds without knowing them (the list is src/job-kinds.ts):
      // modules import src/jobs to enqueue, so src/jobs importing a module would close a cycle of folders.
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            {
              target: './src/jobs',
              from: './src/modules',
              message: 'src/jobs must not import src/modules: list a job kind in src/job-kinds.ts',
            },
            // What differs between SQLite and PostgreSQL is the engine's (src/db/engine.ts); the
            // dialect's name is for migrations alone, so no module or job can branch on it.
            ...['./src/modules', './src/jobs'].map((target) => ({
              target,
              from: './src/db/dialect.ts',
              message: 'Ask the engine (engineOf(db), src/db/engine.ts) instead of branching on the dialect',
            })),
          ],
        },
      ],
    },
  },
  {
    // Time comes from ctx.clock (src/clock.ts), so that tests move it instead of ageing rows
    // (docs/architecture.md). A justified exception says why in an eslint-disable comment.
    files: ['src/**/*.ts'],
    ignores: ['src/clock.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'Read the time from ctx.clock (src/clock.ts).' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'Read the time from ctx.clock (src/clock.ts): new Date(ctx.clock.now()).',
        },
        { selector: "CallExpression[callee.name='Date']", message: 'Read the time from ctx.clock (src/clock.ts).' },
      ],
    },
  },
  {
    // Response bodies in tests are read loosely on purpose: the assertions check their shape.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
