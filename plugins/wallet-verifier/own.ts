/**
 * Claim and namespace names come from credentials: data, never keys with a meaning to JavaScript.
 * `own(o, k, v)` sets an own data property whatever `k` is (an assignment `o['__proto__'] = v`
 * would set the prototype instead), and `has(o, k)` sees only own properties (`'toString' in {}`
 * is true).
 */
export function own(o: Record<string, unknown>, k: string, value: unknown): void {
  // On a plain object only `__proto__` is an accessor (Object.prototype's); every other name,
  // `toString` and `constructor` included, becomes an own data property by assignment, which is
  // several times cheaper than defineProperty.
  if (k === '__proto__' || Object.getPrototypeOf(o) !== Object.prototype)
    Object.defineProperty(o, k, { value, enumerable: true, writable: true, configurable: true });
  else o[k] = value;
}

export function has(o: Record<string, unknown>, k: string): boolean {
  return Object.hasOwn(o, k);
}
