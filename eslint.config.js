// ESLint flat config: typescript-eslint's strict and stylistic sets, type-aware (the project
// service reads tsconfig.json and renderer/tsconfig.json), over the whole tree, with Prettier owning
// layout (eslint-config-prettier turns off the rules that would fight it). Type information is what
// lets the rules below see a promise nobody awaits, an async callback where void is expected, and a
// switch that misses a member of a union: the bugs an event-driven codebase grows.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import reactHooks from 'eslint-plugin-react-hooks';
import globals from 'globals';
import tseslint from 'typescript-eslint';

// Files no tsconfig covers (plain JS and the tools' own config files): linted without types.
const untyped = ['**/*.js', '**/*.mjs', '**/*.cjs', 'vitest.config.ts', 'renderer/vite.config.ts'];

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'data/',
      'dist/',
      'coverage/',
      'renderer/dist/',
      'bench/results/',
      'renderer/src/api/schema.d.ts',
      'renderer/src/api/enums.ts',
      'release/',
      // npm run test:node22 keeps a copy of the tree (and its node_modules) here.
      '.cache/',
      'test-artifacts/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  // The plain stylistic set: its type-checked extras (optional chains, `??`, `!` style) would be ~190
  // rewrites of working code across every branch in flight, for no change in behaviour.
  ...tseslint.configs.stylistic,
  prettier,
  {
    languageOptions: {
      globals: { ...globals.node },
      ecmaVersion: 2023,
      sourceType: 'module',
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
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
      // With noUncheckedIndexedAccess off, index and Map lookups are typed as always present, so
      // these two call the guards and `!`s written for those lookups (and for input that only
      // claims its type) unnecessary; removing them would make code trust what the compiler cannot see.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // An `async` function without `await` still rejects rather than throws; dropping `async` to
      // please the rule would change how its errors reach the caller.
      '@typescript-eslint/require-await': 'off',
      // Numbers and booleans print as expected in text (ports, counts, sizes), and an absent value
      // shown as `undefined`/`null` in a log or error line is what the reader should see; objects,
      // `any`, `never` and regexps still need an explicit conversion.
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: true, allowAny: false, allowNever: false, allowRegExp: false },
      ],
      // `() => resolve()` and `return next()` in a void function are the short forms of calling a void
      // function; the rule still refuses a void value used inside another expression.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true, ignoreVoidReturningFunctions: true }],
      // The three rules this config exists for; named here so no later block turns them off by accident.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // A `default:` branch is the written decision about the remaining members; a switch without
      // one must name every member of the union it switches on.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
    },
  },
  {
    // The console runs in the browser.
    files: ['renderer/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    // The console's components follow the Rules of Hooks (React's own lint set).
    files: ['renderer/**/*.tsx'],
    ...reactHooks.configs.flat.recommended,
  },
  {
    // Plain JS and config files outside every tsconfig: the same rules, without type information.
    files: untyped,
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The sign-in pages' small scripts run in the browser (served from resources/login/).
    files: ['resources/**/*.js'],
    languageOptions: { globals: { ...globals.browser }, sourceType: 'script' },
  },
  {
    // Time through the Clock (server/clock.ts; ctx.clock): the appliance's time comes from the clock
    // its context hands out, so tests can move it (expiry, freshness, retention) and every part
    // agrees on it. Elapsed time for a cache, a throttle or a drain deadline is measured with the
    // monotonic `performance.now()`, which a test's manual clock must not freeze. Formatting a
    // given instant (`new Date(ms)`) is fine. Not in server/clock.ts (the clock itself), nor in the
    // SIP/media bridge: a separate process without a plugin context, whose timers are the media's
    // real time.
    files: ['server/**/*.ts', 'plugins/**/*.ts'],
    ignores: ['server/clock.ts', 'plugins/telephony/bridge/**'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'Date',
          property: 'now',
          message: 'Take the time from the Clock (ctx.clock.now(), or a Clock passed in); performance.now() for elapsed time.',
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'new Date() reads the wall clock: use new Date(clock.now()) with the Clock of the context.',
        },
      ],
    },
  },
  {
    // Tests and benches drive real peers and fixtures; the rules above still apply.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-empty-function': 'off',
      // The fakes' route handlers answer with `return send(...)`, the express idiom.
      '@typescript-eslint/no-confusing-void-expression': 'off',
      // Tests read the real server's JSON answers (`res.json()` is `any`) and check them with
      // expect(); the assertions are the type check there. Product code keeps these rules.
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: true, allowAny: true, allowNever: false, allowRegExp: false },
      ],
      '@typescript-eslint/restrict-plus-operands': [
        'error',
        { allowAny: true, allowBoolean: false, allowNullish: false, allowNumberAndString: false, allowRegExp: false },
      ],
    },
  },
);
