import { html } from '../../../server/sdk.ts';
import type { FullTranscript } from '../schemas.ts';

/**
 * The public page of a shared transcript, rendered on the server. Transcript text is what a caller
 * said on the phone, i.e. attacker-controlled: every value is HTML-escaped, and the CSP allows no
 * script at all, so markup that slipped through would still not run (two independent walls).
 */

const STYLE = [
  'body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}',
  'main{max-width:46rem;margin:0 auto;padding:1.5rem}',
  'h1{font-size:1.4rem;margin:0 0 .25rem}',
  '.meta{color:#57606a;margin:0 0 1.5rem}',
  'ol{list-style:none;margin:0;padding:0}',
  'li{background:#fff;border-radius:.5rem;padding:.75rem 1rem;margin:0 0 .75rem;box-shadow:0 1px 2px rgba(0,0,0,.08)}',
  'li.caller{background:#eef6ff}',
  '.who{font-weight:600;margin-right:.5rem}',
  'time{color:#57606a;font-size:.85rem}',
  'p.text{margin:.25rem 0 0;white-space:pre-wrap;overflow-wrap:anywhere}',
].join('');

/**
 * Headers of every answer of the page, found or not: no script, no subresource, no framing, no
 * indexing, no Referer to whatever the reader opens next (the URL is the credential), no caching.
 */
export const SHARE_PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  // The one inline style block is allowed by its digest; nothing else loads.
  'Content-Security-Policy': html.csp({ styles: [STYLE] }),
  'X-Robots-Tag': 'noindex, nofollow, noarchive',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
});

const page = (title: string, body: string) => html.page({ title, body, style: STYLE });

/** Seconds from the start of the call, as m:ss (the reader wants "when in the call", not a clock). */
function offset(startedUtc: string, ts: string): string {
  const ms = Date.parse(ts) - Date.parse(startedUtc);
  if (!Number.isFinite(ms) || ms < 0) return '';
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/**
 * The transcript: when, how long, how it ended, and the turns. Phone numbers, e-mail and the
 * requester are left out on purpose: whoever holds the link is not necessarily allowed to know them.
 */
export function renderSharePage(tr: FullTranscript): string {
  const turns = (Array.isArray(tr.turns) ? tr.turns : []).map((t) => {
    const caller = t.speaker === 'Caller';
    const at = offset(tr.startedUtc, t.ts);
    return (
      `<li class="${caller ? 'caller' : 'ai'}"><span class="who">${html.escape(caller ? 'Caller' : 'AI')}</span>` +
      (at ? `<time datetime="${html.escape(t.ts)}">${html.escape(at)}</time>` : '') +
      `<p class="text">${html.escape(t.text)}</p></li>`
    );
  });
  const meta = [html.escape(tr.startedUtc), `${html.escape(tr.durationSec)} s`, html.escape(tr.outcome)].filter(Boolean).join(' · ');
  return page('Call transcript', `<h1>Call transcript</h1>\n<p class="meta">${meta}</p>\n<ol>\n${turns.join('\n')}\n</ol>`);
}

/** One page for every link that does not open (unknown, expired, revoked, another tenant's). */
export const NOT_FOUND_PAGE = page(
  'Link not available',
  '<h1>Link not available</h1>\n<p class="meta">This link does not exist, has expired or was revoked.</p>',
);
