/**
 * The desk-phone registrar (RFC 3261 §10.3): LAN SIP phones REGISTER with digest auth per user
 * (accounts pushed by the core, PUT /phones), and their bindings say where an office-tab route
 * rings them. Bindings live in memory: a phone re-registers within its expiry after a bridge restart.
 */
import { makeResponse, parseNameAddr, parseUri, newTag, type SipRequest } from '../sip/message.ts';
import type { ServerRequestContext } from '../sip/transaction.ts';
import type { Peer } from '../sip/transport.ts';
import { DigestGuard, type GuardOptions } from './auth.ts';
import type { PhoneAccount } from './control.ts';

export interface Binding {
  contact: string;
  peer: Peer;
  expiresAt: number;
}

const MAX_BINDINGS = 5;
const MIN_EXPIRES = 60;
const MAX_EXPIRES = 3600;
/** RFC 5626 §4.4.1: how often a phone's flow is pinged (its NAT and our connection stay open). */
const FLOW_TIMER_SEC = 120;

export class Registrar {
  private accounts = new Map<string, PhoneAccount>();
  private readonly bindings = new Map<string, Binding[]>();
  readonly guard: DigestGuard;

  constructor(realm: string, limits: Omit<GuardOptions, 'realm' | 'proxy'> = {}) {
    this.guard = new DigestGuard({ ...limits, realm, proxy: false });
  }

  setAccounts(list: PhoneAccount[]): void {
    this.accounts = new Map(list.map((a) => [a.username, a]));
    for (const u of [...this.bindings.keys()]) if (!this.accounts.has(u)) this.bindings.delete(u);
  }

  /** Live bindings of an office user's phones, each with its account's SRTP policy. */
  bindingsOf(tenantId: string, user: string): (Binding & Pick<PhoneAccount, 'srtp'>)[] {
    const now = Date.now();
    const out: (Binding & Pick<PhoneAccount, 'srtp'>)[] = [];
    for (const a of this.accounts.values()) {
      if (a.tenantId !== tenantId || a.user !== user) continue;
      out.push(...(this.bindings.get(a.username) ?? []).filter((b) => b.expiresAt > now).map((b) => ({ ...b, srtp: a.srtp })));
    }
    return out;
  }

  /** Per account: how many phones are registered now (GET /phones). */
  status(): { tenantId: string; user: string; username: string; registered: number }[] {
    const now = Date.now();
    return [...this.accounts.values()].map((a) => ({
      tenantId: a.tenantId,
      user: a.user,
      username: a.username,
      registered: (this.bindings.get(a.username) ?? []).filter((b) => b.expiresAt > now).length,
    }));
  }

  handle(ctx: ServerRequestContext): void {
    const req = ctx.req;
    let user = '';
    try {
      user = decodeURIComponent(parseUri(parseNameAddr(req.headers.get('To') ?? '').uri).user);
    } catch {
      return ctx.respond(makeResponse(req, 400, 'Bad Request', newTag()));
    }
    const account = this.accounts.get(user);
    // Only the To user's own login may register it. An unknown user and a wrong password look the
    // same from outside: 403 (no hint which one), and both count towards the waits (auth.ts).
    const username = this.guard.check(ctx, (u) => (account && u === account.username ? account.password : undefined));
    if (username === null || !account) return;
    this.bind(ctx, req, account.username);
  }

  private bind(ctx: ServerRequestContext, req: SipRequest, username: string): void {
    const now = Date.now();
    let list = (this.bindings.get(username) ?? []).filter((b) => b.expiresAt > now);
    const headerExpires = Number(req.headers.get('Expires') ?? '3600');
    for (const c of req.headers.getAll('Contact')) {
      if (c.trim() === '*') {
        list = [];
        continue;
      }
      let na;
      try {
        na = parseNameAddr(c);
      } catch {
        continue;
      }
      let exp = na.params.expires !== undefined ? Number(na.params.expires) : headerExpires;
      if (!Number.isFinite(exp) || exp < 0) exp = 3600;
      list = list.filter((b) => b.contact !== na.uri);
      if (exp === 0) continue;
      exp = Math.min(MAX_EXPIRES, Math.max(MIN_EXPIRES, exp));
      // The phone is reached where its REGISTER came from (a LAN phone behind nothing, or NAT).
      list.push({ contact: na.uri, peer: ctx.from, expiresAt: now + exp * 1000 });
    }
    list = list.slice(-MAX_BINDINGS);
    if (list.length) this.bindings.set(username, list);
    else this.bindings.delete(username);
    const res = makeResponse(req, 200, 'OK', newTag());
    for (const b of list) res.headers.append('Contact', `<${b.contact}>;expires=${Math.round((b.expiresAt - now) / 1000)}`);
    // RFC 5626 §6: a phone on a stream that registers a flow (reg-id) keeps it alive with CRLF
    // pings (answered by the transport), so the connection it is rung on stays open.
    const supported = req.headers.getAll('Supported').join(',');
    if (ctx.from.transport !== 'udp' && /(^|,)\s*outbound\s*(,|$)/i.test(supported) && req.headers.getAll('Contact').some((c) => /;\s*reg-id=/i.test(c))) {
      res.headers.append('Require', 'outbound');
      res.headers.append('Flow-Timer', String(FLOW_TIMER_SEC));
    }
    res.headers.append('Date', new Date(now).toUTCString());
    ctx.respond(res);
  }
}
