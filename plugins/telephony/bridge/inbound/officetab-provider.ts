/**
 * The browser office tab as user endpoints (endpoints.ts): every console tab the core says is open
 * for the user (PUT /officetabs) rings together with their desk phones. Ringing is the core's to
 * show (a `ring` notice it forwards to the tab); the user's accept arrives as the tab's WebRTC
 * offer (POST /officetabs/answer), answered by a werift leg on the rooms' WebRTC thread, and that
 * accept is the tab's answer in the race of UserEndpoints.ring: the first to answer wins.
 *
 * Audio: the tab's leg carries Opus (else G.711) like a room; the caller's leg hands us 16 kHz (80 ms
 * batches, `hear`: G.722 decoded, or G.711 interpolated) and takes the tab's 16 kHz (`play`), which
 * a G.722 caller's leg keeps wideband and a G.711 one low-passes to 8 kHz. An Opus tab and a G.722
 * desk phone or trunk talk at 16 kHz end to end.
 */
import { randomBytes } from 'node:crypto';
import type { z } from 'zod';
import type { MediaLeg } from '../media/leg.ts';
import type { RoomLeg, WebRtcHandlers } from '../webrtc/leg.ts';
import { log } from '../log.ts';
import type { AnsweredEndpoint, EndpointProvider, RingingEndpoint, RingRequest } from './endpoints.ts';
import {
  OfficeTabAnswerBodySchema,
  OfficeTabNoticeAnswerSchema,
  OfficeTabRingBodySchema,
  OfficeTabsBodySchema,
  type OfficeTab,
  type OfficeTabAnswerAnswer,
  type OfficeTabNotice,
  type OfficeTabNoticeAnswer,
} from './officetab-control.ts';
import type { ControlAnswer } from './service.ts';

export interface OfficeTabDeps {
  /** A WebRTC leg on the rooms' thread (webrtc/host.ts `openLeg`). */
  openLeg: (h: WebRtcHandlers, mediaTimeoutMs: number) => RoomLeg;
  callbackUrl: string | undefined;
  token: string;
  instanceId: string;
  /** ICE + DTLS not up this long after the accept: the tab's call is over. */
  connectTimeoutMs?: number;
}

type RingState = 'ringing' | 'answering' | 'answered' | 'over';

interface Ring {
  ringId: string;
  tab: OfficeTab;
  state: RingState;
  settle: (v: AnsweredEndpoint | string) => void;
  endpoint: TabEndpoint | null;
  /** The notices of one ring go out one after the other: a `stop` never overtakes its `ring`. */
  notices: Promise<unknown>;
}

/** The tab's answered call: its WebRTC leg bridged to the caller's media leg. */
class TabEndpoint implements AnsweredEndpoint {
  readonly kind = 'office-tab';
  readonly leg: RoomLeg;
  private caller: MediaLeg | null = null;
  private connected = false;
  private over = false;
  private readonly ended: (() => void)[] = [];
  private connectTimer: NodeJS.Timeout | null;

  /** Told once when the answered call is over, and whether our side ended it. */
  onOver: (byUs: boolean) => void = () => undefined;

  constructor(
    readonly id: string,
    openLeg: OfficeTabDeps['openLeg'],
    connectTimeoutMs: number,
  ) {
    this.leg = openLeg(
      {
        onAudio16k: (pcm) => {
          // The caller's leg takes the tab's 16 kHz as it is (G.722) or low-passed to 8 kHz (G.711).
          if (this.caller && !this.over) this.caller.play(pcm, 16000);
        },
        onConnected: () => {
          this.connected = true;
          if (this.connectTimer) clearTimeout(this.connectTimer);
        },
        onGone: (why) => this.gone(why),
        onVoice: () => undefined,
      },
      10_000,
    );
    this.connectTimer = setTimeout(() => this.gone('the tab did not connect'), connectTimeoutMs);
  }

  connect(caller: MediaLeg): void {
    this.caller = caller;
  }

  hear(pcm16k: Int16Array): void {
    if (this.connected && !this.over) this.leg.play(pcm16k, 16000);
  }

  /** Our side ends it (the caller hung up, the call's end): the tab is told, its leg closed. */
  hangup(): void {
    if (this.over) return;
    this.finish();
    this.onOver(true);
  }

  /** The tab's side ended it (hang-up, tab closed, media gone). */
  gone(why: string): void {
    if (this.over) return;
    log('info', 'office tab call ended by the tab', { tab: this.id, why });
    this.finish();
    this.onOver(false);
    for (const cb of this.ended.splice(0)) cb();
  }

  onEnded(cb: () => void): void {
    this.ended.push(cb);
  }

  /** Drops a leg whose accept did not go through (nobody is told: the call never reached it). */
  discard(): void {
    if (!this.over) this.finish();
  }

  private finish(): void {
    this.over = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectTimer = null;
    void this.leg.stop();
  }
}

export class OfficeTabs implements EndpointProvider {
  readonly kind = 'office-tab';
  private tabs = new Map<string, OfficeTab>();
  private readonly rings = new Map<string, Ring>();

  constructor(private readonly d: OfficeTabDeps) {}

  get size(): number {
    return this.tabs.size;
  }

  ring(req: RingRequest): RingingEndpoint[] {
    // A tab carries one call at a time: one in a call is not rung (its user's other endpoints are).
    const busy = new Set(
      this.live()
        .filter((r) => r.state !== 'ringing')
        .map((r) => r.tab.tabId),
    );
    const mine = [...this.tabs.values()].filter((t) => t.tenantId === req.tenantId && t.user === req.user && !busy.has(t.tabId));
    return mine.map((tab) => {
      const ringId = randomBytes(12).toString('base64url');
      let settle!: (v: AnsweredEndpoint | string) => void;
      const result = new Promise<AnsweredEndpoint | string>((resolve) => (settle = resolve));
      const ring: Ring = { ringId, tab, state: 'ringing', settle, endpoint: null, notices: Promise.resolve() };
      this.rings.set(ringId, ring);
      ring.notices = this.notify({
        op: 'ring',
        ringId,
        tabId: tab.tabId,
        tenantId: tab.tenantId,
        user: tab.user,
        callId: req.callId,
        callerNumber: req.callerNumber,
        callerName: req.callerName,
        ringTimeoutSec: req.ringTimeoutSec,
      }).then((a) => {
        if (!a.ok) this.over(ring, `the tab is not reachable: ${a.error}`);
      });
      return {
        kind: this.kind,
        id: tab.tabId,
        result,
        // Called on every endpoint once the race is decided, the winner too: only a ring still
        // ringing (or being accepted) stops.
        cancel: () => {
          if (ring.state === 'ringing' || ring.state === 'answering') {
            this.over(ring, 'cancelled');
            this.stopNotice(ring, 'no longer ringing');
          }
        },
      };
    });
  }

  private over(ring: Ring, why: string): void {
    if (ring.state === 'over') return;
    ring.state = 'over';
    this.forget(ring);
    ring.settle(why);
  }

  /** Kept a minute as over, so a late accept hears 409 (answered elsewhere) rather than 404. */
  private forget(ring: Ring): void {
    setTimeout(() => {
      if (this.rings.get(ring.ringId) === ring) this.rings.delete(ring.ringId);
    }, 60_000).unref();
  }

  private live(): Ring[] {
    return [...this.rings.values()].filter((r) => r.state !== 'over');
  }

  /** PUT /officetabs: the tabs open now. Rings of a tab that closed stop; its call ends. */
  setTabs(tabs: OfficeTab[]): void {
    this.tabs = new Map(tabs.map((t) => [t.tabId, t]));
    for (const r of this.live()) {
      if (this.tabs.has(r.tab.tabId)) continue;
      if (r.endpoint) r.endpoint.gone('the tab closed');
      else this.over(r, 'the tab closed');
    }
  }

  /** POST /officetabs/answer: the user accepted in that tab. */
  private async answer(ringId: string, tabId: string, offerSdp: string): Promise<{ status: number; body: unknown }> {
    const ring = this.rings.get(ringId);
    if (!ring || ring.tab.tabId !== tabId) return fail(404, 'not_found', 'no such call is ringing in this tab');
    if (ring.state !== 'ringing') return fail(409, 'not_ringing', 'the call was answered elsewhere or is over');
    ring.state = 'answering';
    const ep = new TabEndpoint(tabId, this.d.openLeg, this.d.connectTimeoutMs ?? 15_000);
    let sdp: string;
    try {
      sdp = await ep.leg.answer(offerSdp);
    } catch (err) {
      ep.discard();
      // A bad offer is not an answer: the tab keeps ringing (unless the race ended meanwhile).
      if (ring.state === 'answering') ring.state = 'ringing';
      return fail(400, 'invalid_request', `offerSdp: ${(err as Error).message}`);
    }
    if (ring.state !== 'answering') {
      // Another endpoint answered (or the caller hung up) while the offer was being answered.
      ep.discard();
      return fail(409, 'not_ringing', 'the call was answered elsewhere or is over');
    }
    ring.state = 'answered';
    ring.endpoint = ep;
    ep.onOver = (byUs) => {
      ring.state = 'over';
      this.forget(ring);
      if (byUs) this.stopNotice(ring, 'the call ended');
    };
    ring.settle(ep);
    return { status: 200, body: { ok: true, answerSdp: sdp, codec: ep.leg.codec ?? '' } satisfies OfficeTabAnswerAnswer };
  }

  /** POST /officetabs/decline|hangup: declining a ringing call or ending the answered one. */
  private release(ringId: string, tabId: string, what: 'decline' | 'hangup'): { status: number; body: unknown } {
    const ring = this.rings.get(ringId);
    if (!ring || ring.tab.tabId !== tabId || ring.state === 'over') return { status: 200, body: { ok: true } }; // idempotent
    if (ring.endpoint) ring.endpoint.gone(what === 'decline' ? 'declined' : 'the user hung up');
    else this.over(ring, what === 'decline' ? 'declined in the office tab' : 'hung up in the office tab');
    return { status: 200, body: { ok: true } };
  }

  /** The office tab's control routes (CONTROL-API.md "Office tab"); null when not ours. */
  control(method: string, path: string, body: () => Promise<unknown>): Promise<ControlAnswer> | ControlAnswer {
    if (method === 'GET' && path === '/officetabs') {
      return {
        status: 200,
        body: {
          tabs: [...this.tabs.values()].map((t) => ({ ...t, ringing: this.live().filter((r) => r.tab.tabId === t.tabId && r.state === 'ringing').length })),
        },
      };
    }
    if (method === 'PUT' && path === '/officetabs') {
      return body().then((b) => {
        const r = OfficeTabsBodySchema.safeParse(b);
        if (!r.success) return invalid(r.error);
        this.setTabs(r.data.tabs);
        return { status: 200, body: { ok: true, count: r.data.tabs.length } };
      });
    }
    if (method !== 'POST') return null;
    if (path === '/officetabs/answer') {
      return body().then((b) => {
        const r = OfficeTabAnswerBodySchema.safeParse(b);
        return r.success ? this.answer(r.data.ringId, r.data.tabId, r.data.offerSdp) : invalid(r.error);
      });
    }
    const m = /^\/officetabs\/(decline|hangup)$/.exec(path);
    if (!m) return null;
    return body().then((b) => {
      const r = OfficeTabRingBodySchema.safeParse(b);
      return r.success ? this.release(r.data.ringId, r.data.tabId, m[1] as 'decline' | 'hangup') : invalid(r.error);
    });
  }

  /** Ends every tab's call (bridge shutdown). */
  stop(): void {
    for (const r of this.live()) {
      if (r.endpoint) r.endpoint.hangup();
      else this.over(r, 'bridge shutting down');
    }
  }

  private stopNotice(ring: Ring, reason: string): void {
    ring.notices = ring.notices.then(() => this.notify({ op: 'stop', ringId: ring.ringId, tabId: ring.tab.tabId, reason }));
  }

  /** POST …/internal/bridge/officetab; a failure reads as the tab being unreachable. */
  private async notify(n: OfficeTabNotice): Promise<OfficeTabNoticeAnswer> {
    if (!this.d.callbackUrl) return { ok: false, error: 'no core callback URL' };
    try {
      const res = await fetch(new URL('officetab', this.d.callbackUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.d.token}`, 'x-bridge-instance': this.d.instanceId },
        body: JSON.stringify(n),
        signal: AbortSignal.timeout(5000),
      });
      const json = (await res.json().catch(() => null)) as unknown;
      if (!res.ok) return { ok: false, error: `core answered ${res.status}` };
      const r = OfficeTabNoticeAnswerSchema.safeParse(json);
      return r.success ? r.data : { ok: false, error: 'core answer outside the contract' };
    } catch (err) {
      log('warn', 'office tab notice failed', { op: n.op, error: (err as Error).message });
      return { ok: false, error: (err as Error).message };
    }
  }
}

function fail(status: number, error: string, description: string): { status: number; body: unknown } {
  return { status, body: { error, error_description: description } };
}

function invalid(e: z.ZodError): { status: number; body: unknown } {
  const i = e.issues[0];
  return fail(400, 'invalid_request', `${i?.path.join('.') || 'body'}: ${i?.message ?? 'invalid'}`);
}
