import fs from 'node:fs';
import path from 'node:path';
import { html, reply, resourcePath, type Reply } from '../../server/sdk.ts';
import { templateTexts, text, type Lang, type TextKey } from './page-text.ts';
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
 * Fills `{{name}}` (HTML-escaped) and `{{{name}}}` (already-safe HTML built here) placeholders;
 * `{{lang}}` and `{{t_<key>}}` are the page's language and its words in it (page-text.ts).
 * Pages get a strict CSP: scripts only from this origin, no framing.
 */
export function page(name: string, vars: Record<string, unknown>, status = 200, lang: Lang = 'en'): Reply {
  vars = { ...templateTexts(lang), lang, ...vars };
  const body = template(name)
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- page variables are strings and numbers; an object here is a template bug that should show
    .replace(/\{\{\{(\w+)\}\}\}/g, (_, k: string) => String(vars[k] ?? ''))
    .replace(/\{\{(\w+)\}\}/g, (_, k: string) => html.escape(vars[k]));
  return reply.text(status, body, 'text/html; charset=utf-8', { ...PAGE_HEADERS, 'Content-Language': lang, Vary: 'Accept-Language, Cookie' });
}

/** A page with one message: its title and text in the page's language. */
export function message(lang: Lang, title: TextKey, msg: TextKey, status = 200, vars: Record<string, string> = {}): Reply {
  return page('message.html', { title: text(lang, title, vars), message: text(lang, msg, vars) }, status, lang);
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
