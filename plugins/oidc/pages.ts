import fs from 'node:fs';
import path from 'node:path';
import { html, reply, resourcePath, type Reply } from '../../server/sdk.ts';
/** The sign-in pages live in resources/login/ (shipped defaults an operator may restyle). */
export const PAGES_DIR = resourcePath('login');

const cache = new Map<string, string>();

function template(name: string): string {
  let t = cache.get(name);
  if (t === undefined) {
    t = fs.readFileSync(path.join(PAGES_DIR, name), 'utf8');
    cache.set(name, t);
  }
  return t;
}

/**
 * Fills `{{name}}` (HTML-escaped) and `{{{name}}}` (already-safe HTML built here) placeholders.
 * Pages get a strict CSP: scripts only from this origin, no framing.
 */
export function page(name: string, vars: Record<string, unknown>, status = 200): Reply {
  const text = template(name)
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- page variables are strings and numbers; an object here is a template bug that should show
    .replace(/\{\{\{(\w+)\}\}\}/g, (_, k: string) => String(vars[k] ?? ''))
    .replace(/\{\{(\w+)\}\}/g, (_, k: string) => html.escape(vars[k]));
  return reply.text(status, text, 'text/html; charset=utf-8', PAGE_HEADERS);
}

export const PAGE_HEADERS: Record<string, string> = {
  // No form-action (formsRedirect): Chrome applies it to the redirect after a form post (to the
  // RP's redirect_uri). Styles come from /login/style.css only: the pages have no inline style.
  'Content-Security-Policy': html.csp({ script: ["'self'"], style: ["'self'"], img: ["'self'", 'data:'], connect: ["'self'"], formsRedirect: true }),
  'X-Frame-Options': 'DENY',
  'Cache-Control': 'no-store',
};

export function asset(name: string, type: string): Reply {
  return reply.text(200, template(name), type, { 'Cache-Control': 'no-cache' });
}
