import type { Logger } from '../../../server/sdk.ts';
import type { TelephonyAdmin } from '../trunks/admin.ts';
import type { BridgeLink } from './link.ts';
import type { CallKinds } from '../calls/kinds.ts';
import type { TelephonyRepo } from '../repo.ts';
import type { PhoneAccounts } from '../inbound/phones.ts';
import { trunkTenant, type Trunk } from '../control.ts';

/**
 * Keeps the bridge in step with the store (CONTROL-API.md): every tenant's trunk set is PUT on
 * bridge start and after every change (the CLI, another process, changes trunks too, so a watch compares
 * a fingerprint of the table); a remote bridge is polled, and when it restarted behind our back
 * (new instance, empty trunk set) it gets the set again and the calls it lost are reconciled.
 */
/** What the supervisor keeps in step with the bridge. */
export interface SupervisedParts {
  admin: TelephonyAdmin;
  bridge: BridgeLink;
  callKinds: CallKinds;
  phones?: PhoneAccounts;
  officeTabs?: { push(): Promise<void> };
  /** The certificate of SIP over TLS (inbound/sip-tls.ts). */
  sipTls?: { push(): Promise<void> };
}

export class BridgeSupervisor {
  #pushTimer: NodeJS.Timeout | undefined;
  #watchTimer: NodeJS.Timeout | undefined;
  #stopped = false;
  #lastPush = '';
  #lastInstance = '';
  /** The tenants whose sets went to the bridge last (one whose trunks all went gets an empty set). */
  #pushedTenants = new Set<string>();
  /**
   * How many trunks the bridge took at the last push (-1: unknown); a remote bridge listing another
   * count gets the sets again. Null after a refused set: the bridge keeps that tenant's earlier
   * trunks, whose number is not known here, and pushing the refused set again changes nothing.
   */
  #accepted: number | null = -1;
  #parts: SupervisedParts | undefined;

  constructor(
    private readonly repo: TelephonyRepo,
    private readonly log: Logger,
  ) {}

  /**
   * The admin, the bridge link and the call service call into the supervisor (a trunk changed,
   * the bridge came up or died) and it calls into them: they are built first and attached here,
   * before anything can run.
   */
  attach(parts: SupervisedParts): void {
    this.#parts = parts;
  }

  private get parts(): SupervisedParts {
    if (!this.#parts) throw new Error('bridge supervisor used before setup attached its parts');
    return this.#parts;
  }

  private fingerprint(): string {
    return JSON.stringify(
      this.repo.db
        .prepare(
          'SELECT (SELECT COUNT(*) FROM tel_trunks) AS n, (SELECT MAX(updated_at) FROM tel_trunks) AS u, (SELECT COUNT(*) FROM tel_phones) AS p, (SELECT MAX(updated_at) FROM tel_phones) AS pu',
        )
        .get(),
    );
  }

  /**
   * A bridge (re)started: everything it holds, and the TLS certificate, which a new bridge needs
   * once (it listens for SIP over TLS from then on, and gets each renewal from sip-tls.ts).
   */
  async bridgeStarted(): Promise<void> {
    await this.pushTrunks();
    try {
      await this.parts.sipTls?.push();
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'TLS certificate push to the bridge failed');
    }
  }

  /** A trunk changed here: push soon (changes in one burst go out together). */
  schedulePush(): void {
    if (this.#pushTimer) clearTimeout(this.#pushTimer);
    this.#pushTimer = setTimeout(() => void this.pushTrunks(), 20);
    this.#pushTimer.unref();
  }

  /**
   * Every tenant's trunk set, one request per tenant (`PUT /tenants/:tenantId/trunks`), on bridge
   * start and after every change: each request stays within the bridge's bounds (a tenant has at
   * most `limits.trunks`), and a set the bridge refuses leaves only that tenant's trunks missing.
   * A bridge without the per-tenant path (older, 404) gets the full set (`PUT /trunks`).
   */
  async pushTrunks(): Promise<void> {
    const bridge = this.parts.bridge;
    if (bridge.state !== 'ready') return;
    const fp = this.fingerprint();
    try {
      const done = await this.pushTrunkSets();
      if (done) this.#lastPush = fp;
      // The desk-phone accounts of the registrar go with the trunks (an older bridge without /phones: 404, logged).
      const phones = this.parts.phones;
      if (phones) {
        const p = await bridge.putPhones(phones.forBridge());
        if (!p.ok) this.log.warn({ status: p.status, error: p.error.error }, 'bridge refused the desk-phone accounts');
      }
      // And the office tabs open now (a new bridge knows none).
      await this.parts.officeTabs?.push();
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'trunk push to the bridge failed');
    }
  }

  /**
   * True when the bridge answered every set (a refusal is final, pushing it again changes nothing);
   * false when a request failed on the way (pushed again at the next watch).
   */
  private async pushTrunkSets(): Promise<boolean> {
    const bridge = this.parts.bridge;
    const sets = this.parts.admin.bridgeTrunkSets();
    // A tenant whose last trunk went gets an empty set: its trunks leave the bridge.
    const tenants = [...new Set([...sets.keys(), ...this.#pushedTenants])];
    let accepted: number | null = 0;
    let answered = true;
    for (const tenantId of tenants) {
      let ans;
      try {
        ans = await bridge.putTenantTrunks(tenantId, sets.get(tenantId) ?? []);
      } catch (e) {
        this.log.warn({ tenant: tenantId, err: (e as Error).message }, 'trunk push to the bridge failed');
        answered = false;
        continue;
      }
      if (!ans.ok && ans.status === 404) return this.pushFullSet([...sets.values()].flat());
      if (!ans.ok) {
        this.log.warn(
          { tenant: tenantId, status: ans.status, error: ans.error.error, description: ans.error.error_description },
          "bridge refused a tenant's trunk set",
        );
        accepted = null;
        continue;
      }
      if (accepted !== null) accepted += ans.body.count;
      // One bad trunk is refused alone; the others are in service.
      if (ans.body.rejected.length) this.log.warn({ tenant: tenantId, rejected: ans.body.rejected }, 'bridge refused some trunks');
    }
    // A tenant whose empty set did not get through is tried again next time.
    this.#pushedTenants = new Set(answered ? sets.keys() : tenants);
    this.#accepted = answered ? accepted : -1;
    return answered;
  }

  /** An older bridge: the full set in one request (refused whole beyond its bounds). */
  private async pushFullSet(trunks: Trunk[]): Promise<boolean> {
    const ans = await this.parts.bridge.putTrunks(trunks);
    if (!ans.ok) {
      this.log.warn({ status: ans.status, error: ans.error.error, description: ans.error.error_description }, 'bridge refused the trunk set');
      this.#accepted = -1;
      return false;
    }
    if (ans.body.rejected.length) this.log.warn({ rejected: ans.body.rejected }, 'bridge refused some trunks');
    this.#accepted = ans.body.count;
    return true;
  }

  /** Called with the X-Bridge-Instance of every callback: a new one means the bridge restarted. */
  instanceSeen(instance: string): void {
    const prev = this.#lastInstance;
    this.#lastInstance = instance;
    if (prev && prev !== instance) {
      this.log.warn({ instance }, 'new bridge instance');
      void this.bridgeStarted();
      void this.reconcile(instance);
    }
  }

  /** Starts the watch (every `pollMs`): trunk changes from other processes, a remote bridge's health. */
  start(pollMs: number): void {
    this.#stopped = false;
    let watching = false;
    this.#watchTimer = setInterval(() => {
      if (watching) return;
      watching = true;
      void this.watch().finally(() => {
        watching = false;
      });
    }, pollMs);
    this.#watchTimer.unref();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#pushTimer) clearTimeout(this.#pushTimer);
    if (this.#watchTimer) clearInterval(this.#watchTimer);
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  private async watch(): Promise<void> {
    if (this.#stopped) return;
    const bridge = this.parts.bridge;
    if (bridge.mode !== 'remote') {
      if (bridge.state === 'ready' && this.fingerprint() !== this.#lastPush) await this.pushTrunks();
      return;
    }
    let health;
    try {
      health = await bridge.health();
    } catch {
      if (bridge.state === 'ready') this.log.warn('remote bridge stopped answering');
      bridge.markRemote(false);
      return;
    }
    const wasDown = bridge.state !== 'ready';
    bridge.markRemote(true);
    const theirs = health.trunks.length;
    // Trunks of a tenant this process never pushed (a core restarted, the tenant's trunks removed
    // meanwhile): that tenant gets a set too, an empty one, in the push their count difference causes.
    for (const t of health.trunks) this.#pushedTenants.add(trunkTenant(t.id));
    if (wasDown || this.fingerprint() !== this.#lastPush || (this.#accepted !== null && theirs !== this.#accepted)) await this.pushTrunks();
    if (wasDown) await this.reconcile(null);
  }

  /**
   * Calls of every kind (outbound, inbound SIP, rooms) that we think the bridge carries but that it
   * neither lists (GET /calls) nor reported on since `instance` appeared end as failed `bridge
   * restarted`. No answer, or one outside the contract, touches nothing: it does not say which
   * calls the bridge lost.
   */
  async reconcile(instance: string | null): Promise<void> {
    try {
      const { calls } = await this.parts.bridge.listCalls();
      const active = new Set(calls.map((c) => c.callId));
      const reported = instance ? this.repo.db.prepare('SELECT 1 FROM tel_bridge_events WHERE instance = ? AND call_id = ?') : null;
      const kept = (callId: string) => active.has(callId) || (reported !== null && reported.get(instance, callId) !== undefined);
      this.parts.callKinds.bridgeRestarted(kept);
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'bridge reconcile failed');
    }
  }
}
