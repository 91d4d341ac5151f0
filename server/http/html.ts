import crypto from 'node:crypto';

/**
 * Pages the appliance renders itself (sign-in pages, QR pages, shared transcripts, rooms): one
 * escaper, one page shell, one Content-Security-Policy builder. Styles inline in a page are
 * allowed by their digest (CSP3 hash-source), never by 'unsafe-inline': markup that slipped
 * through the escaper still cannot style (or script) the page.
 */

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and quoted attribute values (HTML §13.1.2.3, §13.1.2.6). */
export function escape(v: unknown): string {
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- escapes whatever a page passes; callers pass strings and numbers
  return String(v ?? '').replace(/[&<>"']/g, (c) => ESC[c]!);
}

/** The CSP3 hash-source of an inline `<style>` block: `'sha256-…'` of its exact text. */
export function styleHash(css: string): string {
  return `'sha256-${crypto.createHash('sha256').update(css).digest('base64')}'`;
}

export interface CspSources {
  /** Inline `<style>` blocks of the page (each allowed by its hash). */
  styles?: readonly string[];
  /** Further style sources (`'self'` for a stylesheet of this origin). */
  style?: readonly string[];
  script?: readonly string[];
  connect?: readonly string[];
  img?: readonly string[];
  media?: readonly string[];
  /**
   * Leave form-action out: a page whose form's answer redirects on to another site (a client's
   * redirect_uri), which Chrome checks against form-action too. Otherwise form-action 'none'.
   */
  formsRedirect?: boolean;
}

/**
 * A page's Content-Security-Policy: nothing unless listed (`default-src 'none'`), no `<base>`,
 * no framing, no form posts (unless `formsRedirect`), inline styles by hash only.
 */
export function csp(s: CspSources): string {
  const style = [...(s.style ?? []), ...(s.styles ?? []).map(styleHash)];
  const parts = ["default-src 'none'"];
  if (s.script?.length) parts.push(`script-src ${s.script.join(' ')}`);
  if (style.length) parts.push(`style-src ${style.join(' ')}`);
  if (s.img?.length) parts.push(`img-src ${s.img.join(' ')}`);
  if (s.connect?.length) parts.push(`connect-src ${s.connect.join(' ')}`);
  if (s.media?.length) parts.push(`media-src ${s.media.join(' ')}`);
  parts.push("base-uri 'none'");
  if (!s.formsRedirect) parts.push("form-action 'none'");
  parts.push("frame-ancestors 'none'");
  return parts.join('; ');
}

/**
 * A self-contained page (no index, no referrer) with its one inline style block; `body` is HTML
 * built by the caller from escaped values. Pair it with `csp({ styles: [style] })`.
 */
export function page(o: { title: string; body: string; style: string; lang?: string }): string {
  return [
    '<!doctype html>',
    `<html lang="${escape(o.lang ?? 'en')}">`,
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="robots" content="noindex, nofollow, noarchive">',
    '<meta name="referrer" content="no-referrer">',
    `<title>${escape(o.title)}</title>`,
    `<style>${o.style}</style>`,
    '</head>',
    `<body><main>${o.body}</main></body>`,
    '</html>',
  ].join('\n');
}
