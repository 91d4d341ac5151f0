import { AppError, ConflictError, InputError, type KeyService, NotFoundError, type Tenant } from '../../../server/sdk.ts';
import { TrunkSchema, type Trunk } from '../control.ts';
import type { NumberRow, TelephonyRepo } from '../repo.ts';
import type { OutboundRouteRow } from '../routing.ts';
import { defaultPort, fromRow, toContract, toRow, TRUNK_ID_RE, type TrunkInput, type TrunkRow, type TrunkSettings } from './trunk.ts';
import type { z } from 'zod';
import { checkTenantLimit, DEFAULT_LIMITS, type numberInput, type TelephonyLimits } from '../schemas.ts';

/**
 * Trunks, tenant settings, outbound routes, the PSTN whitelist and virtual numbers:
 * the configuration side of telephony, no HTTP (routes.ts and cli.ts both call it).
 */
export class TelephonyAdmin {
  constructor(
    private readonly repo: TelephonyRepo,
    private readonly keys: KeyService,
    private readonly now: () => string,
    /** Told after any trunk change (pushes every tenant's set to the bridge). */
    private readonly trunksChanged: () => void = () => {
      // Nobody to tell (tests, tools): the server's supervisor passes its push here.
    },
    /** Per-tenant caps (the plugin's `limits` setting). */
    private readonly limits: TelephonyLimits = DEFAULT_LIMITS,
  ) {}

  /** Rows of `table` the tenant holds (the caps count them; a replaced row is not a new one). */
  private count(table: 'tel_trunks' | 'tel_numbers' | 'tel_outbound_routes', t: Tenant): number {
    return (this.repo.db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant_id = ?`).get(t.id) as { n: number }).n;
  }

  // ---- trunks ----------------------------------------------------------------------------------

  private trunkAad(t: Pick<Tenant, 'id'>, id: string): string {
    return `telephony-trunk:${t.id}:${id}`;
  }

  saveTrunk(t: Tenant, input: TrunkInput): TrunkRow {
    const id = input.id ?? slug(input.name);
    if (!TRUNK_ID_RE.test(id)) throw new InputError('invalid field id: cannot derive a trunk id from the name; give one', 'invalid_request', { field: 'id' });
    const settings: TrunkSettings = { ...input, id, port: input.port ?? defaultPort(input.transport) };
    // Checked with the bridge's own contract now, so a trunk the bridge would refuse (too many
    // codecs, control characters in a header value) is a 400 here, never a set the bridge refuses later.
    const contract = TrunkSchema.safeParse(toContract(t.id, settings, input.password));
    if (!contract.success) {
      const issue = contract.error.issues[0]!;
      const field = issue.path.map(String).join('.');
      throw new InputError(`invalid field ${field}: ${issue.message} (the telephony bridge accepts no other)`, 'invalid_request', { field });
    }
    const prev = this.repo.trunk(t, id);
    if (!prev) checkTenantLimit('trunks', this.limits.trunks, this.count('tel_trunks', t));
    let sealed = prev?.password_sealed ?? '';
    if (input.password !== undefined) sealed = input.password === '' ? '' : this.keys.seal(input.password, this.trunkAad(t, id));
    this.repo.upsertTrunk(t, toRow(settings, sealed), this.now());
    this.trunksChanged();
    return this.repo.trunk(t, id)!;
  }

  trunks(t: Tenant): TrunkRow[] {
    return this.repo.trunks(t);
  }

  /** The outbound routes that list the trunk (what deleting it would change). */
  routesUsing(t: Tenant, id: string): OutboundRouteRow[] {
    return this.repo.outboundRoutes(t).filter((r) => r.trunkIds.includes(id));
  }

  /**
   * Deletes a trunk. One the outbound routes still list is refused (409 trunk_in_use naming the
   * routes) unless `force`: then, in the same transaction, it is taken out of each of them, and a
   * route left without any trunk is deleted (it could only fail every call it matched). Nothing
   * is left pointing at a trunk that is gone.
   */
  removeTrunk(t: Tenant, id: string, opts: { force?: boolean } = {}): { row: TrunkRow; routesChanged: string[]; routesRemoved: string[] } {
    const out = this.repo.tx(() => {
      const row = this.repo.trunk(t, id);
      if (!row) throw new NotFoundError(`no trunk ${id}`);
      const using = this.routesUsing(t, id);
      if (using.length && !opts.force) {
        const names = using.map((r) => r.match);
        throw new AppError(
          409,
          'trunk_in_use',
          `trunk ${id} is used by ${names.length} outbound route(s): ${names.join(', ')}; repeat with force to take it out of them`,
          { extra: { routes: names } },
        );
      }
      const routesChanged: string[] = [];
      const routesRemoved: string[] = [];
      for (const r of using) {
        const rest = r.trunkIds.filter((x) => x !== id);
        if (rest.length) {
          this.repo.updateOutbound(t, r.match, rest);
          routesChanged.push(r.match);
        } else {
          this.repo.deleteOutbound(t, r.match);
          routesRemoved.push(r.match);
        }
      }
      this.repo.deleteTrunk(t, id);
      const s = this.repo.settings(t);
      if (s.default_trunk_id === id) this.repo.saveSettings(t, { ...s, default_trunk_id: '' });
      return { row, routesChanged, routesRemoved };
    });
    this.trunksChanged();
    return out;
  }

  /**
   * Every tenant's trunks as the bridge takes them (control.ts `Trunk`; ids `<tenant-id>.<trunk-id>`),
   * with decrypted passwords: only for PUT /trunks on the loopback hop.
   */
  bridgeTrunks(): Trunk[] {
    return [...this.bridgeTrunkSets().values()].flat();
  }

  /** `bridgeTrunks`, one set per tenant (PUT /tenants/:tenantId/trunks): tenant id → its trunks. */
  bridgeTrunkSets(): Map<string, Trunk[]> {
    const sets = new Map<string, Trunk[]>();
    for (const r of this.repo.allTrunksForBridge()) {
      const trunk = toContract(
        r.tenant_id,
        fromRow(r),
        r.password_sealed ? this.keys.openString(r.password_sealed, this.trunkAad({ id: r.tenant_id }, r.id)) : undefined,
      );
      const set = sets.get(r.tenant_id);
      if (set) set.push(trunk);
      else sets.set(r.tenant_id, [trunk]);
    }
    return sets;
  }

  // ---- settings --------------------------------------------------------------------------------

  settings(t: Tenant): { defaultTrunkId: string; hasEngineApiKey: boolean; model: string } {
    const s = this.repo.settings(t);
    return { defaultTrunkId: s.default_trunk_id, hasEngineApiKey: s.engine_api_key_sealed !== '', model: s.model };
  }

  saveSettings(t: Tenant, input: { defaultTrunkId?: string; engineApiKey?: string; model?: string }): void {
    const s = this.repo.settings(t);
    if (input.defaultTrunkId && !this.repo.trunk(t, input.defaultTrunkId)) {
      throw new InputError(`invalid field defaultTrunkId: no trunk ${input.defaultTrunkId}`, 'invalid_request', { field: 'defaultTrunkId' });
    }
    this.repo.saveSettings(t, {
      default_trunk_id: input.defaultTrunkId ?? s.default_trunk_id,
      engine_api_key_sealed:
        input.engineApiKey === undefined
          ? s.engine_api_key_sealed
          : input.engineApiKey === ''
            ? ''
            : this.keys.seal(input.engineApiKey, `telephony-engine:${t.id}`),
      model: input.model ?? s.model,
    });
  }

  tenantEngineKey(t: Tenant): string | undefined {
    const s = this.repo.settings(t);
    return s.engine_api_key_sealed ? this.keys.openString(s.engine_api_key_sealed, `telephony-engine:${t.id}`) : undefined;
  }

  // ---- outbound routes (spec "Route rules", "Outbound route") ---------------------------------

  outbound(t: Tenant): { routes: OutboundRouteRow[]; defaultTrunkId: string } {
    return { routes: this.repo.outboundRoutes(t), defaultTrunkId: this.repo.settings(t).default_trunk_id };
  }

  outboundOne(t: Tenant, match: string): OutboundRouteRow {
    const r = this.repo.outboundRoute(t, match);
    if (!r) throw new NotFoundError(`no outbound route ${match}`);
    return r;
  }

  /** A route naming a trunk the tenant does not have would fail every call it matches: refuse it. */
  private checkTrunks(t: Tenant, trunkIds: string[]): void {
    const i = trunkIds.findIndex((id) => !this.repo.trunk(t, id));
    if (i >= 0) throw new InputError(`invalid field trunkIds[${i}]: no trunk ${trunkIds[i]}`, 'invalid_request', { field: `trunkIds[${i}]` });
  }

  /** Appended at the end; an existing match answers 409 duplicate_route. */
  addOutbound(t: Tenant, r: OutboundRouteRow): OutboundRouteRow {
    return this.repo.tx(() => {
      if (this.repo.outboundRoute(t, r.match))
        throw new ConflictError('duplicate_route', `an outbound route for ${r.match} exists; PUT it to change its trunks`);
      this.checkTrunks(t, r.trunkIds);
      checkTenantLimit('routes', this.limits.routes, this.count('tel_outbound_routes', t));
      this.repo.appendOutbound(t, r);
      return this.repo.outboundRoute(t, r.match)!;
    });
  }

  /** PUT replaces trunkIds only; the match (the key) is not editable. */
  updateOutbound(t: Tenant, match: string, trunkIds: string[]): OutboundRouteRow {
    if (!this.repo.outboundRoute(t, match)) throw new NotFoundError(`no outbound route ${match}`);
    this.checkTrunks(t, trunkIds);
    if (!this.repo.updateOutbound(t, match, trunkIds)) throw new NotFoundError(`no outbound route ${match}`);
    return this.repo.outboundRoute(t, match)!;
  }

  deleteOutbound(t: Tenant, match: string): OutboundRouteRow {
    return this.repo.tx(() => {
      const r = this.repo.outboundRoute(t, match);
      if (!r) throw new NotFoundError(`no outbound route ${match}`);
      this.repo.deleteOutbound(t, match);
      return r;
    });
  }

  // ---- whitelist -------------------------------------------------------------------------------

  whitelist(t: Tenant) {
    return this.repo.whitelist(t).map((r) => ({ number: r.number, comment: r.comment, addedAtUtc: r.added_at, addedBy: r.added_by }));
  }

  whitelistAdd(t: Tenant, number: string, comment: string, by: string): boolean {
    return this.repo.whitelistAdd(t, number, comment, by, this.now());
  }

  /**
   * An admin's add: a new number is added; a listed one keeps its place and date and takes the
   * new comment (an admin who types a comment means it). Calls add with whitelistAdd, which never
   * overwrites an admin's comment.
   */
  whitelistSave(t: Tenant, number: string, comment: string, by: string): { added: boolean; updated: boolean } {
    return this.repo.tx(() => {
      if (this.repo.whitelistAdd(t, number, comment, by, this.now())) return { added: true, updated: false };
      return { added: false, updated: this.repo.whitelistComment(t, number, comment) };
    });
  }

  whitelistRemove(t: Tenant, number: string): { number: string; comment: string; addedAtUtc: string; addedBy: string } {
    const entry = this.whitelist(t).find((w) => w.number === number);
    if (!entry) throw new NotFoundError(`${number} is not on the whitelist`);
    this.repo.whitelistRemove(t, number);
    return entry;
  }

  // ---- virtual numbers -------------------------------------------------------------------------

  saveNumber(t: Tenant, input: z.infer<typeof numberInput>): NumberRow {
    const prev = this.repo.number(t, input.number);
    if (!prev) checkTenantLimit('numbers', this.limits.numbers, this.count('tel_numbers', t));
    let sealed = prev?.engine_api_key_sealed ?? '';
    if (input.geminiApiKey !== undefined)
      sealed = input.geminiApiKey === '' ? '' : this.keys.seal(input.geminiApiKey, `telephony-number:${t.id}:${input.number}`);
    this.repo.upsertNumber(t, {
      number: input.number,
      name: input.name,
      mode: input.mode,
      voice: input.voice,
      language: input.language,
      save_transcripts: input.saveTranscripts ? 1 : 0,
      max_duration_sec: input.maxDurationSec,
      visibility: input.visibility,
      system_prompt: input.systemPrompt,
      engine_api_key_sealed: sealed,
      created_at: prev?.created_at ?? this.now(),
    });
    return this.repo.number(t, input.number)!;
  }

  numbers(t: Tenant, limit?: number, offset?: number) {
    return this.repo.numbers(t, limit, offset);
  }

  removeNumber(t: Tenant, number: string): NumberRow {
    const row = this.repo.number(t, number);
    if (!row) throw new NotFoundError(`no virtual number ${number}`);
    this.repo.deleteNumber(t, number);
    return row;
  }
}

/** The public view of a number: never the engine key (spec "Virtual number record"). */
export function numberView(r: NumberRow) {
  return {
    name: r.name,
    number: r.number,
    mode: r.mode,
    voice: r.voice,
    language: r.language,
    saveTranscripts: r.save_transcripts === 1,
    maxDurationSec: r.max_duration_sec,
    visibility: r.visibility,
    systemPrompt: r.system_prompt,
    hasEngineKey: r.engine_api_key_sealed !== '',
  };
}

function slug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
}
