/**
 * Route matching, pure (no I/O): the dialer and tests use these directly.
 * Spec "Outbound route": `match` is a dial-prefix pattern, a trailing `*` is a wildcard suffix and
 * the literal `global` is the catch-all. Spec "Route rules" 1: inbound is first match by Did.
 */

export interface OutboundRouteRow {
  match: string;
  trunkIds: string[];
}

export interface InboundRouteRow {
  did: string;
  fromNumber: string;
  user: string;
}

/** A pattern with a trailing `*` matches by prefix; without one it matches exactly. */
export function patternMatches(pattern: string, value: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return value.startsWith(pattern.slice(0, -1));
  return pattern === value;
}

export function outboundMatches(match: string, phone: string): boolean {
  if (match === 'global') return true;
  // A dial prefix written without + still matches an E.164 number (`49*` ~ `+49...`).
  return patternMatches(match, phone) || (!match.startsWith('+') && phone.startsWith('+') && patternMatches(match, phone.slice(1)));
}

/**
 * The trunks to try for `phone`, in order: the first row (in table order) whose pattern matches;
 * without one, the tenant's default trunk; without that, none.
 */
export function pickTrunks(routes: readonly OutboundRouteRow[], defaultTrunkId: string | null | undefined, phone: string): string[] {
  for (const r of routes) if (outboundMatches(r.match, phone)) return [...r.trunkIds];
  return defaultTrunkId ? [defaultTrunkId] : [];
}

/** Inbound: first row whose Did matches and whose optional FromNumber filter matches the caller. */
export function pickInbound(routes: readonly InboundRouteRow[], did: string, from: string | null): InboundRouteRow | undefined {
  const caller = from && from !== 'anonymous' ? from : '';
  return routes.find((r) => {
    const didOk = r.did === 'anonymous' ? caller === '' : patternMatches(r.did, did);
    if (!didOk) return false;
    if (!r.fromNumber) return true;
    if (r.fromNumber === 'anonymous') return caller === '';
    return caller !== '' && patternMatches(r.fromNumber, caller);
  });
}
