import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { requestTarget } from '../../server/http/dispatch.ts';

/**
 * The dispatcher reads a request's path and query through requestTarget: a plain target is split
 * as it stands, anything else goes through WHATWG URL. Either way the router must see exactly
 * what `new URL(target, 'http://localhost')` gives (dot segments resolved, `\` as `/`, `//host`
 * taken as an authority, percent-encoding kept, `#` cut off), or a route could be reached under a
 * spelling that the checks before never saw.
 */
type Read = { pathname: string; query: [string, string][] } | 'invalid';
function viaUrl(t: string): Read {
  try {
    const u = new URL(t, 'http://localhost');
    return { pathname: u.pathname, query: [...u.searchParams] };
  } catch {
    return 'invalid';
  }
}
function viaTarget(t: string): Read {
  try {
    const r = requestTarget(t);
    return { pathname: r.pathname, query: [...r.searchParams] };
  } catch {
    return 'invalid';
  }
}

describe('requestTarget reads a target as URL does', () => {
  it.each([
    '/api.ashx/v1/auditlog?limit=50',
    '/api.ashx/v1/auditlog',
    '/api.ashx/v1/auditlog?',
    '/',
    '/.well-known/openid-configuration',
    '/signal.ashx?whitelist=add&x=1&x=2',
    "/a?q=it's+a%20b&e=%zz&=v&k",
    '/a/./b',
    '/a/../b',
    '/a/b/..',
    '/a/b/.',
    '/a/.?x=1',
    '/a/..?x=1',
    '/a/%2e%2e/b',
    '/a/%2E/b',
    '/a\\b',
    '/a\\..\\b',
    '//evil.example/x?y=1',
    '/a#frag',
    '/a?b=1#frag',
    '/a b?c d',
    '/a\tb',
    '/caf\u00e9?x=\u00e9',
    '/a?x=%F0%9F%98%80',
    '/a//b',
    '/..',
    '/.',
    '/.a/..b/...',
    'http://other.example/a?b=1',
    '*',
    '/??',
    '/a??b=1',
    '//',
  ])('%j', (t) => {
    expect(viaTarget(t)).toEqual(viaUrl(t));
  });

  it('on arbitrary targets', () => {
    const ch = fc.constantFrom(..."abAZ09-._~!$&'()*+,;=:@/?#%\\ \t.2eE".split(''), 'é', '\u0000');
    fc.assert(
      fc.property(fc.array(ch, { maxLength: 30 }), (cs) => {
        const t = `/${cs.join('')}`;
        expect(viaTarget(t)).toEqual(viaUrl(t));
      }),
      { numRuns: 5000 },
    );
  });
});
