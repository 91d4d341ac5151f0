import type { Logger } from '../../../server/sdk.ts';
import type { BridgeEvent } from '../control.ts';
import { type CallKind, endCall, type EndDeps } from './end.ts';

/** The errorDetail of every call a bridge restart ended (CONTROL-API.md "Rooms", README "Bridge supervision"). */
export const BRIDGE_RESTARTED = 'bridge restarted';

/**
 * The kinds of call the bridge carries, in one registry: it finds a callback's call by its row
 * (outbound `oac-…`, inbound SIP and room `vnum…` ids), applies the bridge's events to it
 * (CONTROL-API.md "Bridge → core": deduplicated by (instance, seq) in the transaction of the
 * change, and by the call's state), and ends every kind's calls when the bridge restarts.
 */
export class CallKinds {
  readonly #kinds: readonly CallKind[];

  constructor(
    kinds: readonly CallKind[],
    private readonly d: EndDeps & { log: Logger },
  ) {
    this.#kinds = kinds;
  }

  private find(callId: string): { kind: CallKind; row: { call_id: string; tenant_id: string } } | undefined {
    for (const kind of this.#kinds) {
      const row = kind.row(callId);
      if (row) return { kind, row };
    }
    return undefined;
  }

  /** Applies one callback. Duplicates (same instance and seq, or a state already past) are no-ops. */
  apply(instance: string, ev: BridgeEvent): { applied: boolean } {
    const { repo, events } = this.d;
    // (instance, seq) is recorded in the same transaction as the change it causes: a failure
    // leaves it unrecorded, so the bridge's retry applies it then.
    const mark = () => repo.markBridgeEvent(instance, ev.seq, ev.callId, ev.type, new Date(this.d.clock.now()).toISOString());
    const found = this.find(ev.callId);
    if (!found) {
      if (repo.tx(mark)) this.d.log.warn({ callId: ev.callId, type: ev.type }, 'bridge event for an unknown call');
      return { applied: false };
    }
    const { kind, row: c } = found;
    if (!this.d.tenants.byId(c.tenant_id)) return { applied: false };
    switch (ev.type) {
      case 'dialing':
        return { applied: repo.tx(() => mark() && kind.onDialing(c, ev)) };
      case 'answered':
        return {
          applied: repo.tx(() => {
            if (!mark()) return false;
            const e = kind.onAnswered(c, ev);
            if (!e) return false;
            // Spec "Event kinds": call answered arrives just before call.started.
            if (e.answered) events.emit(c.tenant_id, 'call.answered', e.answered);
            events.emit(c.tenant_id, 'call.started', e.started);
            return true;
          }),
        };
      case 'transferred':
        return {
          applied: repo.tx(() => {
            if (!mark()) return false;
            events.emit(c.tenant_id, 'call.transferred', kind.onTransferred(c, ev));
            return true;
          }),
        };
      case 'ended':
        return { applied: endCall(this.d, kind, c, ev, mark) };
    }
  }

  /**
   * The bridge restarted (or a new core starts a new one): the calls it carried are gone, their
   * media and dialogs died with it. Each ends as `failed`, `bridge restarted`, as a normal end
   * would (row, call.ended, in one transaction); `keep` spares the calls a remote bridge still
   * lists or has reported on since it came back. Returns how many ended.
   */
  bridgeRestarted(keep: (callId: string) => boolean = () => false): number {
    let n = 0;
    for (const kind of this.#kinds) {
      for (const c of kind.atBridge()) {
        if (!keep(c.call_id) && endCall(this.d, kind, c, { outcome: 'failed', errorDetail: BRIDGE_RESTARTED })) n++;
      }
    }
    if (n) this.d.log.warn({ calls: n }, 'calls the bridge no longer carries ended as failed: the bridge restarted');
    return n;
  }
}
