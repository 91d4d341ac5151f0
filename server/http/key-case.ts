/** Deepest nesting of arrays and objects a JSON body may have (the API's deepest shape is under 8). */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether `value` nests deeper than `max`, walked without recursion: every later walk of a body
 * (key folding, schema validation) recurses, and 200,000 nested brackets would overflow the stack.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * Request bodies accept camelCase or PascalCase keys (spec: "did or Did"). Keys that start with
 * an upper-case letter followed by a lower-case one are folded to camelCase, recursively;
 * everything else (snake_case, `_schema`, all-caps) stays as sent.
 */
export function camelizeKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camelizeKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    // JSON.parse makes "__proto__" an own key; assigning it would set `out`'s prototype and let
    // its fields pass schema validation as if sent (a strict schema sees no unknown key). Dropped.
    if (k === '__proto__') continue;
    const key = /^[A-Z][a-z]/.test(k) ? k[0]!.toLowerCase() + k.slice(1) : k;
    // An explicit camelCase key wins over its PascalCase twin if both are sent (own keys only:
    // `ToString` is an ordinary key, not Object.prototype.toString).
    if (Object.hasOwn(out, key) && key !== k) continue;
    out[key] = camelizeKeys(v);
  }
  return out;
}

/** Echo helper for the routes whose responses the spec shows in PascalCase (inbound routes). */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- accepts any object type without an index signature (interfaces), which Record<string, unknown> alone refuses
export function pascalizeKeys<T extends Record<string, unknown>>(obj: T): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k[0]!.toUpperCase() + k.slice(1)] = v;
  return out;
}
