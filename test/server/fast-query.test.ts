import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { z } from 'zod';
import { fastQuery } from '../../server/http/fast-query.ts';
import { pageQuery } from '../../server/http/envelope.ts';
import { auditQuery } from '../../plugins/audit/schemas.ts';

/**
 * The dispatcher checks a route's query with fastQuery's check first and with zod only when that
 * check is unsure. So for every input the check accepts, zod must accept it too and give the very
 * same value (keys in the same order); and the check must accept the ordinary valid inputs, or it
 * saves nothing.
 */
const schemas = {
  pageQuery,
  auditQuery,
  strict: z.strictObject({ state: z.enum(['open', 'closed']).optional(), q: z.string().min(2).max(5) }),
  bounds: z.object({
    a: z.coerce.number().gt(-3).lt(10),
    b: z.coerce.number().int().min(0).max(100).optional(),
    c: z.number().optional(),
    d: z.coerce.string().length(3).optional(),
  }),
  numericEnum: z.object({ n: z.enum(['1', '2', 'x']).optional() }),
};

const VALUES = [
  '',
  '0',
  '-0',
  '1',
  '-1',
  '2',
  '007',
  '1.5',
  '1.',
  '.5',
  '1e3',
  ' 7',
  '7 ',
  '+3',
  '0x10',
  'abc',
  'ab',
  'abcde',
  'abcdef',
  'NaN',
  'Infinity',
  '-Infinity',
  '9',
  '10',
  '-3',
  '-2.9999',
  '50',
  '100',
  '101',
  '500',
  '501',
  '9007199254740991',
  '9007199254740993',
  '123456789012345',
  '1234567890123456',
  'open',
  'closed',
  'OPEN',
  'x',
  '2026-12-05T10:00:00Z',
  'x'.repeat(199),
  'x'.repeat(200),
  'x'.repeat(201),
  '\u00e9\u00e9\u00e9',
  '\u{1F600}',
  ['1', '2'],
  ['open'],
];
const KEYS = ['limit', 'offset', 'event', 'user', 'since', 'state', 'q', 'a', 'b', 'c', 'd', 'n', 'other', 'constructor', 'toString'];

const inputArb = fc.dictionary(fc.constantFrom(...KEYS), fc.oneof(fc.constantFrom(...VALUES), fc.string({ maxLength: 8 }), fc.integer().map(String)), {
  maxKeys: 6,
});

describe('fastQuery gives what zod gives, or leaves the input to zod', () => {
  for (const [name, schema] of Object.entries(schemas)) {
    it(`${name}: every input the check accepts, zod accepts with the same value`, () => {
      const check = fastQuery(schema);
      expect(check, 'a simple schema gets a check').toBeDefined();
      let accepted = 0;
      let valid = 0;
      fc.assert(
        fc.property(inputArb, (input) => {
          const fast = check!(input);
          const slow = schema.safeParse(input);
          if (slow.success) valid++;
          if (fast === undefined) return;
          accepted++;
          expect(slow.success).toBe(true);
          expect(fast).toStrictEqual(slow.data);
          expect(Object.keys(fast)).toEqual(Object.keys(slow.data as object));
        }),
        { numRuns: 3000 },
      );
      // The check is worth having: it takes a good share of the valid inputs (about a third of
      // these random ones; the bound leaves room for an unlucky seed, which once gave exactly a
      // third). The plainly written listing queries below are all its own.
      expect(accepted).toBeGreaterThan(valid / 5);
    });
  }

  it('leaves a string with a surrogate pair to zod where a length bound applies (zod counts code points)', () => {
    const check = fastQuery(schemas.strict!)!;
    // Two UTF-16 units, one code point: zod refuses it for min(2).
    expect(schemas.strict!.safeParse({ q: '😀' }).success).toBe(false);
    expect(check({ q: '😀' })).toBeUndefined();
    expect(check({ q: 'ab' })).toStrictEqual({ q: 'ab' });
  });

  it('takes the ordinary listing queries itself', () => {
    const check = fastQuery(auditQuery)!;
    for (const input of [
      {},
      { limit: '50' },
      { limit: '50', offset: '100' },
      { event: 'login', user: 'ann', since: '2026-01-01' },
      { limit: '10', other: 'x' },
    ]) {
      expect(check(input)).toStrictEqual(auditQuery.parse(input));
    }
  });

  it('leaves invalid inputs to zod, so its refusals are zod’s', () => {
    const check = fastQuery(auditQuery)!;
    for (const input of [
      { limit: '0' },
      { limit: 'x' },
      { limit: '' },
      { offset: '-1' },
      { limit: ['1', '2'] },
      { event: 'e'.repeat(201) },
      { limit: '1.5' },
    ]) {
      expect(check(input)).toBeUndefined();
      expect(auditQuery.safeParse(input).success).toBe(false);
    }
  });

  it('gives no check for schemas it cannot model', () => {
    const notSimple = [
      z.object({ a: z.string().default('x') }),
      z.object({ a: z.string().transform((s) => s.length) }),
      z.object({ a: z.string().trim() }),
      z.object({ a: z.string().regex(/^a/) }),
      z.object({ a: z.email() }),
      z.object({ a: z.iso.datetime() }),
      z.object({ a: z.int() }),
      z.object({ a: z.literal('x') }),
      z.object({ a: z.string().optional().optional() }),
      z.object({ a: z.string() }).refine(() => true),
      z.object({ a: z.union([z.string(), z.number()]) }),
      z.object({ a: z.string().nullable() }),
      z.object({ a: z.boolean() }),
      z.object({ a: z.number().multipleOf(2) }),
      z.looseObject({ a: z.string() }),
      z.object({ constructor: z.string().optional() }),
      z.string(),
    ];
    for (const s of notSimple) expect(fastQuery(s)).toBeUndefined();
  });
});
