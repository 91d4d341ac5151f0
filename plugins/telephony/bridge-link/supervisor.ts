import type { Logger } from '../../../server/sdk.ts';
import type { TelephonyAdmin } from '../trunks/admin.ts';
import type { BridgeLink } from './link.ts';
import type { CallKinds } from '../calls/kinds.ts';
import type { TelephonyRepo } from '../repo.ts';
import type { PhoneAccounts } from '../inbound/phones.ts';

/**
 * Keeps the bridge in step with the store (CONTROL-API.md): the full trunk set is PUT on bridge
 * start and after every change (the CLI, another process, changes trunks too, so a watch compares
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
}

export class BridgeSupervisor {
  #pushTimer: NodeJS.Timeout | undefined;
  #watchTimer: NodeJS.Timeout | undefined;
  #stopped = false;
  #lastPush = '';
  #lastInstance = '';
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

  /** A trunk changed here: push soon (changes in one burst go out together). */
  schedulePush(): void {
    if (this.#pushTimer) clearTimeout(this.#pushTimer);
    this.#pushTimer = setTimeout(() => void this.pushTrunks(), 20);
    this.#pushTimer.unref();
  }

  /** PUT /trunks with the full set: on bridge start and after every change. */
  async pushTrunks(): Promise<void> {
    const bridge = this.parts.bridge;
    if (bridge.state !== 'ready') return;
    const fp = this.fingerprint();
    const trunks = this.parts.admin.bridgeTrunks();
    try {
      const ans = await bridge.putTrunks(trunks);
      if (!ans.ok) this.log.warn({ status: ans.status, error: ans.error.error, description: ans.error.error_description }, 'bridge refused the trunk set');
      else {
        this.#lastPush = fp;
        // One bad trunk is refused alone; the others are in service.
        if (ans.body.rejected.length) this.log.warn({ rejected: ans.body.rejected }, 'bridge refused some trunks');
      }
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

  /** Called with the X-Bridge-Instance of every callback: a new one means the bridge restarted. */
  instanceSeen(instance: string): void {
    const prev = this.#lastInstance;
    this.#lastInstance = instance;
    if (prev && prev !== instance) {
      this.log.warn({ instance }, 'new bridge instance');
      void this.pushTrunks();
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
    if (wasDown || this.fingerprint() !== this.#lastPush || theirs !== this.parts.admin.bridgeTrunks().length) await this.pushTrunks();
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
