import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', '.bench/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      eqeqeq: ['error', 'smart'],
    },
  },
  {
    // Time comes from ctx.clock (src/clock.ts), so that tests move it instead of ageing rows
    // (docs/architecture.md). A justified exception says why in an eslint-disable comment.
    files: ['src/**/*.ts'],
    ignores: ['src/clock.ts'],
    rules: {
      'no-restricted-properties': ['error', { object: 'Date', property: 'now', message: 'Read the time from ctx.clock (src/clock.ts).' }],
      'no-restricted-syntax': [
        'error',
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'Read the time from ctx.clock (src/clock.ts): new Date(ctx.clock.now()).' },
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
