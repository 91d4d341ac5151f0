/**
 * What a SIP answer or a trunk's error means for an administrator (RFC 3261 §21 status codes):
 * the translation key of a plain explanation, or undefined when the text names nothing known.
 * The raw text stays shown beside it as the detail a carrier's support asks for.
 */
export function sipProblemKey(raw: string | null | undefined): string | undefined {
  if (!raw) return undefined;
  const code = /\b(?:SIP\/2\.0 |SIP )?([3-6]\d\d)\b/.exec(raw)?.[1];
  if (code) {
    if (code === '401' || code === '407') return 'sip.auth';
    if (code === '403') return 'sip.forbidden';
    if (code === '404' || code === '484') return 'sip.notFound';
    if (code === '408' || code === '480') return 'sip.unavailable';
    if (code === '486' || code === '600') return 'sip.busy';
    if (code === '487') return 'sip.cancelled';
    if (code === '488' || code === '415' || code === '606') return 'sip.media';
    if (code === '503' || code === '500' || code === '502') return 'sip.providerDown';
    if (code === '603') return 'sip.declined';
    return 'sip.other';
  }
  if (/timed? ?out|timeout/i.test(raw)) return 'sip.noAnswer';
  if (/ENOTFOUND|EAI_AGAIN|SRV|DNS|resolve/i.test(raw)) return 'sip.dns';
  if (/ECONNREFUSED|EHOSTUNREACH|ENETUNREACH/i.test(raw)) return 'sip.unreachable';
  return undefined;
}

export function sipCode(raw: string | null | undefined): string | undefined {
  return raw ? /\b(?:SIP\/2\.0 |SIP )?([3-6]\d\d)\b/.exec(raw)?.[1] : undefined;
}
