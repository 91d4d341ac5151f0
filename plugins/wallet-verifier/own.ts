/**
 * Claim and namespace names come from credentials: data, never keys with a meaning to JavaScript.
 * `own(o, k, v)` sets an own data property whatever `k` is (an assignment `o['__proto__'] = v`
 * would set the prototype instead), and `has(o, k)` sees only own properties (`'toString' in {}`
 * is true).
 */
export function own(o: Record<string, unknown>, k: string, value: unknown): void {
  Object.defineProperty(o, k, { value, enumerable: true, writable: true, configurable: true });
}

export function has(o: Record<string, unknown>, k: string): boolean {
  return Object.hasOwn(o, k);
}
