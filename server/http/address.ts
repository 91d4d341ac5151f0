export interface ParsedAddress {
  path: string;
  segments: string[];
  verbKey?: string;
  verbValue?: string;
}

export function parseAddress(address: string): ParsedAddress {
  const q = address.indexOf('?');
  const path = q < 0 ? address : address.slice(0, q);
  const verb = q < 0 ? '' : address.slice(q + 1);
  if (!path.startsWith('/')) throw new Error(`route address must start with /: ${address}`);
  const segments = path
    .split('/')
    .slice(1)
    .map((s) => (s.startsWith(':') ? s : s.toLowerCase()));
  if (!verb) return { path, segments };
  const eq = verb.indexOf('=');
  return eq < 0 ? { path, segments, verbKey: verb } : { path, segments, verbKey: verb.slice(0, eq), verbValue: verb.slice(eq + 1) };
}

/** First value of each query key; repeated keys become arrays so a schema can refuse them. */
export function queryObject(sp: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of sp) {
    // `?__proto__=` would set the object's prototype, and `constructor` read an inherited member.
    if (k === '__proto__') continue;
    const prev = Object.hasOwn(out, k) ? out[k] : undefined;
    if (prev === undefined) out[k] = v;
    else out[k] = Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}
