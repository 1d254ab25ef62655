import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '.tools/**', 'test-results/**', 'bench/results/**', 'packages/core/drizzle/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.property.name='only']", message: 'No focused tests (.only).' },
      ],
    },
  },
  {
    // The shape keeps (STYLE rules 3 and 22): a function that outgrows 100 lines gets its steps named and moved out.
    files: ['apps/*/src/**/*.ts', 'packages/*/src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 100, skipBlankLines: false, skipComments: false }] },
  },
  {
    // process.env is read in main.ts files, config and the test harness only (STYLE rule 4).
    files: ['apps/*/src/**/*.ts', 'packages/core/src/**/*.ts'],
    ignores: [
      '**/main.ts',
      '**/cli/**',
      '**/cli.ts',
      'packages/core/src/config/**',
      'packages/core/src/db/migrate-cli.ts',
    ],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Use the config passed in.' },
      ],
    },
  },
);
