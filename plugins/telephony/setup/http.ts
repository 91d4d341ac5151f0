import { z } from 'zod';
import { policy, type RouteRegistrar } from '../../../server/sdk.ts';
import { V1 } from '../http-common.ts';
import type { TelephonyServices } from '../services.ts';
import { trunkStatus } from '../trunks/http.ts';
import { checklist, type SetupItem } from './checklist.ts';

export const sipListeningSchema = z.object({ host: z.string(), port: z.number().int(), transports: z.array(z.string()), lan: z.boolean() });
const checklistSchema = z.object({
  done: z.boolean().describe('every item that is available is done: the console stops showing the list'),
  items: z.array(
    z.object({
      id: z.string(),
      state: z.enum(['done', 'todo', 'not-available']),
      detail: z.string(),
      form: z.string().optional().describe('the console page (and tab) that does it'),
    }),
  ),
  sip: sipListeningSchema.nullable().describe('where SIP listens (embedded bridge); null for a remote or no bridge'),
});

/** `GET /api.ashx/v1/setup/checklist`: the console's setup checklist, computed in one request. */
export function setupHttp(r: RouteRegistrar, svc: TelephonyServices, items: SetupItem[]): void {
  r.add({
    method: 'GET',
    path: `${V1}/setup/checklist`,
    area: 'setup',
    auth: policy.v1Admin,
    summary:
      "The setup checklist: AI engine key, a registered trunk, an outbound route, a default trunk, SIP on the LAN, mail relay, backup target; each item's state and its console form",
    responses: { 200: { description: 'checklist', schema: checklistSchema } },
    handler: async (req) => checklist(items, { tenant: req.tenant, registered: await trunkStatus(svc.bridge) }, svc.sip),
  });
}
