import { describe, expect, it } from 'vitest';
import { cookies, html } from '../../../server/sdk.ts';

describe('SDK cookies', () => {
  it('reads the first cookie of a name and treats an empty value as absent', () => {
    expect(cookies.parse('a=1; b=two; a=3; c=; =x; junk')).toEqual({ a: '1', b: 'two' });
    expect(cookies.get(' sc_sid = abc ;sc_b=def', 'sc_sid')).toBe('abc');
    expect(cookies.get('sc_sid=', 'sc_sid')).toBeUndefined();
    expect(cookies.get(undefined, 'x')).toBeUndefined();
  });
  it('writes HttpOnly, SameSite=Lax cookies, Secure only on https, with a path and lifetime when asked', () => {
    expect(cookies.serialize('sc_b', 'v', { secure: false })).toBe('sc_b=v; Path=/; HttpOnly; SameSite=Lax');
    expect(cookies.serialize('sov_room_login', 'v', { secure: true, maxAge: 600, path: '/room/callback' })).toBe(
      'sov_room_login=v; Path=/room/callback; HttpOnly; SameSite=Lax; Max-Age=600; Secure',
    );
    expect(cookies.serialize('sc_sid', '', { secure: true, maxAge: 0 })).toContain('Max-Age=0');
  });
});

describe('SDK html', () => {
  it('escapes the five characters that matter in content and quoted attributes', () => {
    expect(html.escape(`<a href="x" title='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
    expect(html.escape(undefined)).toBe('');
    expect(html.escape(42)).toBe('42');
  });
  it('allows inline styles by their SHA-256, never by unsafe-inline, and denies everything not listed', () => {
    const style = 'body{margin:0}';
    const policy = html.csp({ styles: [style], script: ["'self'"] });
    expect(policy).toBe(
      `default-src 'none'; script-src 'self'; style-src ${html.styleHash(style)}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    );
    expect(html.styleHash(style)).toMatch(/^'sha256-[A-Za-z0-9+/]{43}='$/);
    expect(policy).not.toContain('unsafe-inline');
    expect(html.csp({ style: ["'self'"], formsRedirect: true })).not.toContain('form-action');
  });
  it('wraps a body in a page shell whose title is escaped and whose style is the hashed block', () => {
    const p = html.page({ title: 'a<b', body: '<p>hi</p>', style: 'p{color:red}' });
    expect(p).toContain('<title>a&lt;b</title>');
    expect(p).toContain('<style>p{color:red}</style>');
    expect(p).toContain('<body><main><p>hi</p></main></body>');
    expect(p.startsWith('<!doctype html>')).toBe(true);
  });
});
