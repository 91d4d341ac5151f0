/**
 * The office tab at the core: a signed-in user's console tab registers as their phone by holding
 * `GET /api.ashx/v1/phone/register` open (text/event-stream); the registration lives exactly as
 * long as that connection. The core keeps the open tabs, gives the bridge the full set
 * (PUT /officetabs), shows the tab what the bridge says (ring, stop), and passes the user's accept
 * (the tab's WebRTC offer), decline and hang-up on to the bridge after checking that the ring is
 * theirs: same tenant, same user, the tab that was rung.
 */
import crypto from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { AppError, NotFoundError, type Logger, type Principal, type Tenant } from '../../../server/sdk.ts';
import { bridgeError, type BridgeLink, type ControlAnswer } from '../bridge-link/link.ts';
import type { OfficeTab, OfficeTabNotice, OfficeTabNoticeAnswer } from '../bridge/inbound/officetab-control.ts';

/** Tabs one user may have registered at once (each is rung on every call). */
export const MAX_TABS_PER_USER = 8;
const PING_EVERY_MS = 15_000;

interface Tab extends OfficeTab {
  subject: string;
  res: ServerResponse;
  ping: NodeJS.Timeout;
}

interface Ringing {
  ringId: string;
  tabId: string;
  tenantId: string;
  user: string;
  callId: string;
  answered: boolean;
}

export class OfficeTabService {
  private readonly tabs = new Map<string, Tab>();
  private readonly rings = new Map<string, Ringing>();
  private pushTimer: NodeJS.Timeout | undefined;
  private pushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly bridge: BridgeLink,
    private readonly log: Logger,
  ) {}

  get size(): number {
    return this.tabs.size;
  }

  /** The tabs for PUT /officetabs. */
  forBridge(): OfficeTab[] {
    return [...this.tabs.values()].map((t) => ({ tabId: t.tabId, tenantId: t.tenantId, user: t.user }));
  }

  /** The office user a principal rings as: a person's bearer only (not a client or a key). */
  static userOf(p: Principal | null): { user: string; subject: string } {
    if (!p || p.kind !== 'user' || !p.userName) throw new AppError(403, 'insufficient_scope', "the office tab needs a user's own sign-in");
    return { user: p.userName, subject: p.subject };
  }

  /** Registers the tab behind `res` until the connection closes. */
  async open(res: ServerResponse, tenant: Tenant, principal: Principal | null): Promise<void> {
    const { user, subject } = OfficeTabService.userOf(principal);
    const mine = [...this.tabs.values()].filter((t) => t.tenantId === tenant.id && t.subject === subject).length;
    if (mine >= MAX_TABS_PER_USER) {
      throw new AppError(409, 'conflict', `at most ${MAX_TABS_PER_USER} office tabs per user are registered at once`, {
        reason: 'too_many_tabs',
        params: { limit: MAX_TABS_PER_USER },
      });
    }
    if (!this.bridge.configured) throw new AppError(503, 'bridge_not_configured', 'no telephony bridge is configured: the office tab cannot ring');
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
    res.socket?.setNoDelay(true);
    const tabId = crypto.randomBytes(16).toString('base64url');
    const ping = setInterval(() => res.write(': ping\n\n'), PING_EVERY_MS);
    ping.unref();
    const tab: Tab = { tabId, tenantId: tenant.id, user, subject, res, ping };
    this.tabs.set(tabId, tab);
    res.on('close', () => this.close(tab));
    res.write('retry: 3000\n\n');
    this.log.info({ tenant: tenant.id, user, tabs: this.tabs.size }, 'office tab registered');
    // `registered` only once the bridge knows the tab: from then on a call rings it.
    await this.push();
    if (this.tabs.has(tabId)) this.frame(tab, 'registered', { user, bridge: this.bridge.state });
  }

  private close(tab: Tab): void {
    if (!this.tabs.delete(tab.tabId)) return;
    clearInterval(tab.ping);
    for (const r of [...this.rings.values()]) if (r.tabId === tab.tabId) this.rings.delete(r.ringId);
    this.log.info({ tenant: tab.tenantId, user: tab.user, tabs: this.tabs.size }, 'office tab closed');
    this.schedulePush();
  }

  private frame(tab: Tab, event: string, data: object): void {
    tab.res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  private schedulePush(): void {
    if (this.pushTimer) clearTimeout(this.pushTimer);
    this.pushTimer = setTimeout(() => void this.push(), 20);
    this.pushTimer.unref();
  }

  /** PUT /officetabs with the set as it is when the push runs (pushes never overlap). */
  push(): Promise<void> {
    this.pushing = this.pushing.then(async () => {
      if (this.bridge.state !== 'ready') return;
      try {
        const a = await this.bridge.putOfficeTabs(this.forBridge());
        if (!a.ok) this.log.warn({ status: a.status, error: a.error.error }, 'bridge refused the office tabs');
      } catch (e) {
        this.log.warn({ err: (e as Error).message }, 'office tab push to the bridge failed');
      }
    });
    return this.pushing;
  }

  /** The bridge's notices (POST /internal/bridge/officetab). */
  notice(n: OfficeTabNotice): OfficeTabNoticeAnswer {
    const tab = this.tabs.get(n.tabId);
    if (n.op === 'ring') {
      // Tenant sealing: a tab rings only for its own tenant's user, whatever the bridge asks.
      if (!tab || tab.tenantId !== n.tenantId || tab.user !== n.user) return { ok: false, error: 'no such tab' };
      const ring: Ringing = { ringId: n.ringId, tabId: n.tabId, tenantId: n.tenantId, user: n.user, callId: n.callId, answered: false };
      this.rings.set(n.ringId, ring);
      // Should the bridge never say `stop` (it died), an unanswered ring is forgotten after its time.
      setTimeout(
        () => {
          if (this.rings.get(n.ringId) === ring && !ring.answered) this.rings.delete(n.ringId);
        },
        (n.ringTimeoutSec + 60) * 1000,
      ).unref();
      this.frame(tab, 'ring', {
        ringId: n.ringId,
        callId: n.callId,
        callerNumber: n.callerNumber,
        callerName: n.callerName,
        ringTimeoutSec: n.ringTimeoutSec,
      });
      return { ok: true };
    }
    const r = this.rings.get(n.ringId);
    if (r && r.tabId === n.tabId) this.rings.delete(n.ringId);
    if (tab) this.frame(tab, 'stop', { ringId: n.ringId, reason: n.reason });
    return { ok: true };
  }

  /** A ring of this tenant's signed-in user (404 for anything else: nothing about others' calls leaks). */
  private own(tenant: Tenant, principal: Principal | null, ringId: string): Ringing {
    const { subject } = OfficeTabService.userOf(principal);
    const r = this.rings.get(ringId);
    const tab = r ? this.tabs.get(r.tabId) : undefined;
    if (!r || !tab || r.tenantId !== tenant.id || tab.tenantId !== tenant.id || tab.subject !== subject) {
      throw new NotFoundError('no such call is ringing for you');
    }
    return r;
  }

  /** The user accepts: the tab's offer goes to the bridge, whose answer goes back to the tab. */
  async accept(
    tenant: Tenant,
    principal: Principal | null,
    ringId: string,
    sdp: string,
  ): Promise<{ ringId: string; callId: string; sdp: string; codec: string }> {
    const r = this.own(tenant, principal, ringId);
    if (r.answered) throw new AppError(409, 'conflict', 'this call was already accepted', { reason: 'call_already_accepted' });
    const a = this.bridgeAnswer('POST /officetabs/answer', await this.bridge.answerOfficeTab({ ringId, tabId: r.tabId, offerSdp: sdp }));
    r.answered = true;
    return { ringId, callId: r.callId, sdp: a.answerSdp, codec: a.codec };
  }

  /**
   * Decline (still ringing) or hang up (answered); idempotent once the ring is over. A ring that
   * is still on but not the caller's own (another user's, another tenant's) is 404 like accept.
   */
  async release(tenant: Tenant, principal: Principal | null, ringId: string, what: 'decline' | 'hangup'): Promise<{ ok: true; ringId: string }> {
    // Over already (the caller hung up first): nothing to do, but still only for a signed-in user.
    if (!this.rings.has(ringId)) {
      OfficeTabService.userOf(principal);
      return { ok: true, ringId };
    }
    const r = this.own(tenant, principal, ringId);
    this.rings.delete(ringId);
    this.bridgeAnswer(`POST /officetabs/${what}`, await this.bridge.releaseOfficeTab(what, { ringId, tabId: r.tabId }));
    return { ok: true, ringId };
  }

  private bridgeAnswer<T>(operation: string, a: ControlAnswer<T>): T {
    if (a.ok) return a.body;
    if (a.status === 404 || a.status === 409) {
      throw new AppError(409, 'conflict', a.error.error_description || 'the call was answered elsewhere or is over', { reason: 'call_answered_elsewhere' });
    }
    if (a.status === 400) throw new AppError(400, 'invalid_request', `sdp: ${a.error.error_description}`);
    throw bridgeError(operation, a);
  }

  /** Ends every tab's stream (shutdown): the tabs register again with the next process. */
  closeAll(): void {
    for (const t of [...this.tabs.values()]) {
      clearInterval(t.ping);
      t.res.end();
    }
    this.tabs.clear();
    this.rings.clear();
  }
}
