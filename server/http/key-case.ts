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
    const key = /^[A-Z][a-z]/.test(k) ? k[0]!.toLowerCase() + k.slice(1) : k;
    // An explicit camelCase key wins over its PascalCase twin if both are sent.
    if (key in out && key !== k) continue;
    out[key] = camelizeKeys(v);
  }
  return out;
}

/** Echo helper for the routes whose responses the spec shows in PascalCase (inbound routes). */
export function pascalizeKeys<T extends Record<string, unknown>>(obj: T): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k[0]!.toUpperCase() + k.slice(1)] = v;
  return out;
}
