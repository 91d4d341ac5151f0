import { z } from 'zod';
import type { RouteRequest } from '../../server/sdk.ts';
import type { TelephonyServices } from './services.ts';

/** One audit entry for an admin change (never a secret in `extra`: the audit writer drops those keys anyway). */
export function audited<T>(svc: TelephonyServices, req: RouteRequest, event: string, extra: Record<string, string | number | boolean>, out: T): T {
  svc.audit.write(req.tenant, { event, user: req.principal?.userName ?? req.principal?.subject ?? '', ip: req.ip, ua: req.ua, extra });
  return out;
}

/** Who acts, as audit entries and records name them. */
export const actor = (req: RouteRequest) => req.principal?.userName ?? req.principal?.subject ?? '';

export const okBody = z.object({ ok: z.boolean() }).loose();
export const err = (d: string) => ({ description: d });

export const V1 = '/api.ashx/v1';
export const SIG = '/signal.ashx';
