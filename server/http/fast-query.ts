import type { z } from 'zod';

/**
 * A route's query schema, checked without zod when it can be: most v1 query schemas are an object
 * of optional strings, coerced numbers and enums, and zod's general parse of one costs a visible
 * share of a small request (bench/core.bench.ts). `fastQuery(schema)` looks at the schema once and,
 * when every part of it is one of those simple kinds, returns a check that gives, for an input it
 * accepts, exactly the value zod's parse gives (same keys in the same order, same values). For
 * anything it is not sure of (an invalid input, an array of repeated keys, a number written any
 * other way than plain decimal digits) it returns undefined and the caller parses with zod, so
 * every refusal and its message is still zod's own. Schemas with anything else (defaults,
 * transforms, refinements, formats, unions...) get no fast check at all.
 */
export type FastQuery = (input: Record<string, unknown>) => Record<string, unknown> | undefined;

type Check = (v: unknown) => unknown;

/** The internals of a zod 4 schema read here (`schema._zod.def`). */
interface Def {
  type: string;
  coerce?: boolean;
  checks?: { _zod: { def: CheckDef } }[];
  shape?: Record<string, { _zod: { def: Def } }>;
  catchall?: { _zod: { def: Def } };
  innerType?: { _zod: { def: Def } };
  entries?: Record<string, string | number>;
}

interface CheckDef {
  check: string;
  maximum?: number;
  minimum?: number;
  length?: number;
  value?: unknown;
  inclusive?: boolean;
  format?: string;
}

/** Not a value any check returns: the input is not known good. */
const UNSURE = Symbol('unsure');

/** A number as zod's coercion reads it, limited to plain decimals (no exponent, sign `+`, spaces or empty text, where Number() has its own ideas). */
const PLAIN_NUMBER = /^-?\d{1,15}(?:\.\d{1,15})?$/;

export function fastQuery(schema: z.ZodType): FastQuery | undefined {
  const def = defOf(schema);
  if (def?.type !== 'object' || !plain(def) || def.checks?.length || !def.shape) return undefined;
  // Strip mode (z.object) drops unknown keys; strict mode refuses them (zod says how); loose keeps them: not handled.
  let strict = false;
  if (def.catchall) {
    if (def.catchall._zod.def.type !== 'never') return undefined;
    strict = true;
  }
  const keys: string[] = [];
  const optional: boolean[] = [];
  const checks: Check[] = [];
  for (const key of Object.keys(def.shape)) {
    // zod reads a key with `in`: an inherited name (`constructor`) would be present on every input.
    if (key in Object.prototype) return undefined;
    let field = def.shape[key]!._zod.def;
    const opt = field.type === 'optional';
    if (opt) {
      if (!plain(field) || field.checks?.length || !field.innerType) return undefined;
      field = field.innerType._zod.def;
    }
    const check = leaf(field);
    if (!check) return undefined;
    keys.push(key);
    optional.push(opt);
    checks.push(check);
  }
  const known = new Set(keys);
  return (input) => {
    const out: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const v = input[key];
      if (v === undefined) {
        if (!optional[i] || key in input) return undefined;
        continue;
      }
      const value = checks[i]!(v);
      if (value === UNSURE) return undefined;
      out[key] = value;
    }
    if (strict) {
      for (const k in input) if (!known.has(k)) return undefined;
    }
    return out;
  };
}

function defOf(schema: unknown): Def | undefined {
  return (schema as { _zod?: { def?: Def } } | undefined)?._zod?.def;
}

/**
 * The members a def of each handled kind may have. A schema that is itself a check has more
 * (`z.email()` is a string with `format`, `check` and `pattern`; `z.int()` a number with `format`),
 * and so has any kind a later zod adds to the def: neither is taken for a plain one.
 */
const PLAIN_DEF: Record<string, ReadonlySet<string>> = {
  object: new Set(['type', 'shape', 'catchall', 'checks']),
  optional: new Set(['type', 'innerType', 'checks']),
  string: new Set(['type', 'coerce', 'checks']),
  number: new Set(['type', 'coerce', 'checks']),
  enum: new Set(['type', 'entries', 'checks']),
};

function plain(def: Def): boolean {
  const allowed = PLAIN_DEF[def.type];
  return allowed !== undefined && Object.keys(def).every((k) => allowed.has(k));
}

/** A UTF-16 surrogate unit: half of a code point outside the Basic Multilingual Plane. */
const SURROGATE = /[\uD800-\uDFFF]/;

/** The check of one field's type, or undefined when it is not one of the simple kinds. */
function leaf(def: Def): Check | undefined {
  if (!plain(def)) return undefined;
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  switch (def.type) {
    case 'string': {
      let min = 0;
      let max = Infinity;
      for (const c of checks) {
        if (c.check === 'max_length' && typeof c.maximum === 'number') max = Math.min(max, c.maximum);
        else if (c.check === 'min_length' && typeof c.minimum === 'number') min = Math.max(min, c.minimum);
        else if (c.check === 'length_equals' && typeof c.length === 'number') {
          min = Math.max(min, c.length);
          max = Math.min(max, c.length);
        } else return undefined;
      }
      // z.coerce.string() makes String(v) of anything; for a string that is the string itself.
      // Zod measures length in code points: a string with a surrogate (a code point of two UTF-16
      // units) is left to zod whenever a bound applies.
      if (min === 0 && max === Infinity) return (v) => (typeof v === 'string' ? v : UNSURE);
      return (v) => (typeof v === 'string' && v.length >= min && v.length <= max && !SURROGATE.test(v) ? v : UNSURE);
    }
    case 'number': {
      let int = false;
      const bounds: { above: boolean; value: number; inclusive: boolean }[] = [];
      for (const c of checks) {
        if (c.check === 'number_format' && c.format === 'safeint') int = true;
        else if ((c.check === 'greater_than' || c.check === 'less_than') && typeof c.value === 'number') {
          bounds.push({ above: c.check === 'greater_than', value: c.value, inclusive: c.inclusive === true });
        } else return undefined;
      }
      const coerce = def.coerce === true;
      return (v) => {
        let n: number;
        if (typeof v === 'number') n = v;
        else if (coerce && typeof v === 'string' && PLAIN_NUMBER.test(v)) n = Number(v);
        else return UNSURE;
        if (!Number.isFinite(n) || (int && !Number.isSafeInteger(n))) return UNSURE;
        for (const b of bounds) {
          const ok = b.above ? (b.inclusive ? n >= b.value : n > b.value) : b.inclusive ? n <= b.value : n < b.value;
          if (!ok) return UNSURE;
        }
        return n;
      };
    }
    case 'enum': {
      if (checks.length || !def.entries) return undefined;
      const values = new Set<unknown>(Object.values(def.entries));
      return (v) => (values.has(v) ? v : UNSURE);
    }
    default:
      return undefined;
  }
}
