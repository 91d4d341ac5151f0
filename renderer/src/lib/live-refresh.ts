import type { QueryKey } from '@tanstack/react-query';

/**
 * What each live-feed event makes the open views fetch again: one row per event name, naming the
 * query keys (each a prefix: `['calls']` covers the list, the stats and one call's page). A page
 * whose data an event changes adds its key to that event's row here, and nowhere else.
 *
 * A `family.*` row answers for names of that family that have no row of their own, so an event
 * the server starts to emit (a new call state, say) refreshes its views before it gets a row.
 */
export const REFRESHES: Readonly<Record<string, readonly QueryKey[]>> = {
  'call.started': [['calls']],
  'call.answered': [['calls']],
  'call.transferred': [['calls']],
  'call.ended': [['calls'], ['transcripts']],
  'call.*': [['calls']],
  'outbound-ai.finished': [['calls']],
  'transcript.saved': [['transcripts'], ['calls']],
  'transcript.share.created': [['transcripts', 'shares']],
  'transcript.share.viewed': [['transcripts', 'shares']],
  'transcript.share.revoked': [['transcripts', 'shares']],
  'transcript.*': [['transcripts']],
  'webhook.test': [['webhooks']],
  'webhook.*': [['webhooks']],
  'presentation.verified': [],
  // Live notices (server/live.ts): a call's every state change, and each admin change made over
  // the API by anyone (`<collection>.changed`, server/http/dispatch.ts changeNotice).
  'call.state': [['calls']],
  'calls.changed': [['calls']],
  'trunks.changed': [['status', 'trunks']],
  'outbound-routes.changed': [['routes', 'out']],
  'inbound-routes.changed': [['routes', 'in']],
  'numbers.changed': [['numbers']],
  'whitelist.changed': [['whitelist']],
  'telephony.changed': [
    ['telephony', 'settings'],
    ['status', 'trunks'],
  ],
  'users.changed': [['users'], ['apikeys']],
  'apikeys.changed': [['apikeys']],
  'apikey-create.changed': [['apikeys']],
  'webhooks.changed': [['webhooks']],
  'oidc-clients-save.changed': [['clients']],
  'oidc-clients-genkey.changed': [['clients']],
  'transcripts.changed': [['transcripts']],
  'tenants.changed': [['tenants'], ['tenant-switcher']],
  'rp-cert.changed': [['certs'], ['status', 'ca']],
  'lotl.changed': [['status', 'lotl']],
};

/** The query keys an event of this name refreshes (none for a name without a row or family row). */
export function refreshesFor(name: string): readonly QueryKey[] {
  const own = REFRESHES[name];
  if (own) return own;
  const dot = name.indexOf('.');
  return dot > 0 ? (REFRESHES[`${name.slice(0, dot)}.*`] ?? []) : [];
}
