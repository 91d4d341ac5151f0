/**
 * The console's setup checklist (README "Setup checklist"): what a new office needs before its
 * first call, as 3CX's first-run wizard asks it. One declared list, one entry per item: its id,
 * the console form that does it, and how its state is found, computed here on the server in one
 * request (`GET /api.ashx/v1/setup/checklist`). A new item is one more entry.
 */
import net from 'node:net';
import type { Tenant } from '../../../server/sdk.ts';
import type { TelephonyAdmin } from '../trunks/admin.ts';
import { bridgeTrunkId } from '../trunks/trunk.ts';
import type { TelephonyConfig } from '../schemas.ts';

/** `done`; `todo`; `not-available`: this appliance cannot do it yet (no state to read). */
export type SetupState = 'done' | 'todo' | 'not-available';

/** Where SIP listens, as `/readyz` and the dashboard show it (embedded bridge: its settings). */
export interface SipListening {
  host: string;
  port: number;
  transports: string[];
  /** false on a loopback address: no desk phone or carrier reaches it. */
  lan: boolean;
}

export function sipListening(bridge: TelephonyConfig['bridge']): SipListening | null {
  // A remote bridge listens where it was started; only an embedded one takes these settings.
  if (bridge.mode !== 'embedded') return null;
  const host = bridge.sipHost;
  const loopback = host === 'localhost' || (net.isIPv4(host) && host.startsWith('127.')) || host === '::1';
  return { host, port: bridge.sipPort, transports: ['udp', 'tcp'], lan: !loopback };
}

/** What the items read, gathered once per request. */
export interface SetupFacts {
  tenant: Tenant;
  /** Registration per bridge trunk id (`<tenant-id>.<trunk-id>`), empty when the bridge does not answer. */
  registered: Map<string, { registered: boolean | null }>;
}

export interface SetupItem {
  id: string;
  /** The console page and tab that does it; absent when only a setting or the CLI can. */
  form?: string;
  check(f: SetupFacts): { state: SetupState; detail: string };
}

export interface SetupDeps {
  admin: TelephonyAdmin;
  config: TelephonyConfig;
  /**
   * The backup target, once the appliance keeps one (another part of the product): undefined
   * while there is none to read, and the item shows `not-available`.
   */
  backup?: () => { target: string | null };
}

/** The items, in the order the console shows them. */
export function setupItems(d: SetupDeps): SetupItem[] {
  const done = (ok: boolean, yes: string, no: string) => ({ state: ok ? ('done' as const) : ('todo' as const), detail: ok ? yes : no });
  return [
    {
      id: 'engine-key',
      form: '/telephony?tab=settings',
      check: ({ tenant }) => done(!!d.admin.tenantEngineKey(tenant), 'an AI engine key is stored', 'no AI engine key: calls need one of their own'),
    },
    {
      id: 'trunk-registered',
      form: '/telephony?tab=trunks',
      check: ({ tenant, registered }) => {
        const trunks = d.admin.trunks(tenant);
        const up = trunks.filter((t) => registered.get(bridgeTrunkId(tenant.id, t.id))?.registered === true).map((t) => t.id);
        return done(up.length > 0, `registered: ${up.join(', ')}`, trunks.length ? 'no trunk is registered with its carrier' : 'no trunk');
      },
    },
    {
      id: 'outbound-route',
      form: '/telephony?tab=outbound',
      check: ({ tenant }) => {
        const n = d.admin.outbound(tenant).routes.length;
        return done(n > 0, `${n} outbound route${n === 1 ? '' : 's'}`, 'no outbound route');
      },
    },
    {
      id: 'default-trunk',
      form: '/telephony?tab=settings',
      check: ({ tenant }) => {
        const id = d.admin.outbound(tenant).defaultTrunkId;
        const exists = !!id && d.admin.trunks(tenant).some((t) => t.id === id);
        return done(exists, `default trunk ${id}`, 'no default trunk');
      },
    },
    {
      id: 'sip-lan',
      form: '/telephony?tab=settings',
      check: () => {
        const sip = sipListening(d.config.bridge);
        if (!sip)
          return { state: 'not-available', detail: d.config.bridge.mode === 'remote' ? 'a remote bridge: SIP listens where it was started' : 'no bridge' };
        const where = `${sip.transports.join(', ')} on ${sip.host}:${sip.port}`;
        return done(sip.lan, where, `${where}: only this machine reaches it (sovcomms setup)`);
      },
    },
    {
      id: 'mail-relay',
      check: () => done(!!d.config.mail, `relay ${d.config.mail?.host ?? ''}`, 'no mail relay (plugins.telephony.mail): no outcome mails'),
    },
    {
      id: 'backup-target',
      check: () => {
        const b = d.backup?.();
        if (!b) return { state: 'not-available', detail: 'backups are not available on this appliance yet' };
        return done(!!b.target, `backups to ${b.target ?? ''}`, 'no backup target');
      },
    },
  ];
}

/** The checklist of a tenant: every item's state, and whether everything available is done. */
export function checklist(items: SetupItem[], facts: SetupFacts, sip: SipListening | null) {
  const out = items.map((i) => ({ id: i.id, ...i.check(facts), ...(i.form ? { form: i.form } : {}) }));
  return { done: out.every((i) => i.state !== 'todo'), items: out, sip };
}
