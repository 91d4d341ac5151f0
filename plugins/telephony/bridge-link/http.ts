import { z } from 'zod';
import { AppError, InputError, policy, type RouteRegistrar } from '../../../server/sdk.ts';
import { BridgeEventSchema, isBridgeEventType } from '../control.ts';
import { okBody, SIG } from '../http-common.ts';
import type { TelephonyServices } from '../services.ts';

/** The bridge's status for the super-admin, and its event callback (CONTROL-API.md "Bridge → core"). */
export function bridgeHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  r.add({
    method: 'GET',
    path: `${SIG}?bridge=status`,
    area: 'admin',
    auth: policy.superAdmin('bridge-status'),
    summary: 'Telephony bridge status (mode, state, its /health)',
    responses: { 200: { description: 'status', schema: okBody } },
    handler: async () => {
      const b = svc.bridge;
      let health: unknown = null;
      if (b.configured) {
        try {
          health = await b.health();
        } catch (e) {
          // An API error keeps its code and stable reason (bridge_error: rejected, failed, unreadable).
          health = e instanceof AppError ? { error: e.message, code: e.code, ...e.extra } : { error: (e as Error).message };
        }
      }
      return {
        ok: b.state === 'ready',
        mode: b.mode,
        state: b.state,
        pid: b.pid ?? null,
        controlUrl: b.controlUrl ?? null,
        lastExit: b.lastExit,
        lastFailure: b.lastFailure?.message ?? null,
        health,
      };
    },
  });

  // ---- bridge callbacks (CONTROL-API.md "Bridge → core") --------------------------------------
  r.add({
    method: 'POST',
    path: '/internal/bridge/events',
    area: 'internal',
    auth: policy.custom('telephony-bridge', 'telephony bridge control token'),
    summary: 'Internal: call events from the telephony bridge (loopback, control token)',
    rateLimit: false,
    bodyLimit: 8 * 1024 * 1024,
    body: z.object({ seq: z.number().int().min(0), type: z.string().max(40), callId: z.string().max(64) }).loose(),
    responses: { 200: { description: '{ok, applied}', schema: okBody } },
    handler: (req) => {
      const instance = String(req.headers['x-bridge-instance'] ?? '');
      if (!/^[A-Za-z0-9._-]{1,100}$/.test(instance)) throw new InputError('missing or malformed X-Bridge-Instance header');
      if (!isBridgeEventType(req.body.type)) {
        // Forward compatibility: the bridge retries until a 2xx, so unknown kinds are acknowledged.
        return { ok: true, applied: false, ignored: req.body.type };
      }
      const parsed = BridgeEventSchema.safeParse(req.body);
      if (!parsed.success) {
        // The bridge delivers events in order and retries until a 2xx: a 4xx here would hold
        // back every later event. A malformed one is logged and acknowledged as rejected.
        const i = parsed.error.issues[0]!;
        const rejected = `invalid field ${i.path.join('.')}: ${i.message}`;
        req.log.warn({ type: req.body.type, callId: req.body.callId, rejected }, 'malformed bridge event');
        return { ok: true, applied: false, rejected };
      }
      const out = svc.callKinds.apply(instance, parsed.data);
      svc.instanceSeen?.(instance);
      return { ok: true, ...out };
    },
  });
}
