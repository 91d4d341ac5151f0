// ESLint flat config: typescript-eslint's strict and stylistic sets over the whole tree, with
// Prettier owning layout (eslint-config-prettier turns off the rules that would fight it).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'dist/', 'coverage/', 'renderer/dist/', 'bench/results/', 'renderer/src/api/schema.d.ts', 'release/'] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  ...tseslint.configs.stylistic,
  prettier,
  {
    languageOptions: { globals: { ...globals.node }, ecmaVersion: 2023, sourceType: 'module' },
    rules: {
      // tsconfig has noUncheckedIndexedAccess off, and regex groups, Map lookups right after a
      // `has`, and array slots known by construction read best with `!`; the compiler checks the rest.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Unused names are errors, except the conventional `_` prefix for a parameter a signature needs.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // `let x = fallback; try { x = compute(); } catch { ... }` keeps the fallback visible where x
      // is declared; the rule calls the first value useless. Off, as a style choice.
      'no-useless-assignment': 'off',
      // Type-only imports stay visibly type-only (verbatimModuleSyntax relies on it).
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },
  {
    // The console runs in the browser.
    files: ['renderer/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    // The sign-in pages' small scripts run in the browser (served from resources/login/).
    files: ['resources/**/*.js'],
    languageOptions: { globals: { ...globals.browser }, sourceType: 'script' },
  },
  {
    // Tests and benches drive real peers and fixtures; the rules above still apply.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-empty-function': 'off',
    },
  },
);
