import type * as StatusListModule from '@sd-jwt/jwt-status-list';
import type * as jose from 'jose';
import { loadJose } from './jose.ts';
import type { Clock, DB, Tenant } from '../../server/sdk.ts';
import type { OutboundHttp } from '../webhooks/api.ts';
import { type Anchor, CheckFailed, validateChain } from './x509.ts';

// @sd-jwt/jwt-status-list (with pako) is loaded with the first status checked, not at every start.
let statusListModule: Promise<typeof StatusListModule> | undefined;

/** The status of an entry when no usable list says it: no copy, or only one past its `exp`. */
export const STATUS_UNKNOWN = -1;

export interface StatusListSettings {
  ttlSeconds: number;
  timeoutMs: number;
  /** What an unknown status does: `refuse` the presentation (default), or `accept` it marked unknown. */
  unknown: 'refuse' | 'accept';
  /** Per tenant host name: overrides of `unknown`. */
  tenants: Record<string, { unknown?: 'refuse' | 'accept' }>;
}

/**
 * Token Status List (draft-ietf-oauth-status-list §5, §8) through a cache: a copy younger than
 * `ttlSeconds` is used as is; an older one is refreshed, and when the network cannot be reached
 * (an appliance on an isolated LAN) the last verified copy keeps serving until its `exp` (§5.1),
 * never after: a holder who kept an old list from before a revocation cannot stay valid with it.
 * Downloads go through the tenant's outbound address policy (the webhooks' one, OUTBOUND), so a
 * credential cannot point the verifier at an address a tenant admin could not reach. Without a
 * usable list the status is unknown: refused unless the tenant's setting accepts it.
 */
export class StatusLists {
  constructor(
    private readonly db: DB,
    private readonly clock: Clock,
    private readonly cfg: StatusListSettings,
    /** Looked up at use: the webhooks plugin may be set up after this one (no start-order dependency). */
    private readonly outbound: () => OutboundHttp | undefined,
  ) {}

  /** 0 VALID, 1 INVALID, other list values, or STATUS_UNKNOWN where the tenant accepts an unknown status. */
  async status(tenant: Tenant, anchors: Anchor[], ref: { uri: string; idx: number }): Promise<number> {
    const jwt = await this.usableList(tenant, anchors, ref.uri);
    if (typeof jwt !== 'string') {
      if (this.unknownPolicy(tenant) === 'accept') return STATUS_UNKNOWN;
      throw new CheckFailed('status', `the credential status is unknown: ${jwt.why}`);
    }
    const { getListFromStatusListJWT } = await (statusListModule ??= import('@sd-jwt/jwt-status-list'));
    const list = getListFromStatusListJWT(jwt);
    try {
      return list.getStatus(ref.idx);
    } catch {
      throw new CheckFailed('status', `index ${ref.idx} is outside the status list`);
    }
  }

  private unknownPolicy(tenant: Tenant): 'refuse' | 'accept' {
    for (const h of tenant.hosts) {
      const o = this.cfg.tenants[h]?.unknown;
      if (o) return o;
    }
    return this.cfg.unknown;
  }

  /** A verified list token that is not past its `exp`, fetched or cached; else why there is none. */
  private async usableList(tenant: Tenant, anchors: Anchor[], uri: string): Promise<string | { why: string }> {
    const J = await loadJose();
    const row = this.db.prepare('SELECT jwt, fetched_at FROM vp_status_list WHERE tenant_id = ? AND uri = ?').get(tenant.id, uri) as
      { jwt: string; fetched_at: string } | undefined;
    let jwt = row?.jwt;
    if (!row || this.clock.now() - Date.parse(row.fetched_at) > this.cfg.ttlSeconds * 1000 || this.expired(J, row.jwt)) {
      const fresh = await this.download(tenant, uri);
      if (fresh) {
        await this.verify(fresh, uri, anchors);
        jwt = fresh;
        this.db
          .prepare(
            'INSERT INTO vp_status_list (tenant_id, uri, jwt, fetched_at) VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, uri) DO UPDATE SET jwt = excluded.jwt, fetched_at = excluded.fetched_at',
          )
          .run(tenant.id, uri, fresh, new Date(this.clock.now()).toISOString());
      }
    }
    if (!jwt) return { why: `the status list ${uri} cannot be fetched and no copy is cached` };
    if (this.expired(J, jwt)) return { why: `the status list ${uri} cannot be fetched and the cached copy is past its exp` };
    return jwt;
  }

  /** §5.1: a list token past its `exp` must not be used (the clock is ours; no grace). */
  private expired(J: typeof jose, jwt: string): boolean {
    let exp: unknown;
    try {
      exp = J.decodeJwt(jwt).exp;
    } catch {
      return true;
    }
    return typeof exp === 'number' && this.clock.now() >= exp * 1000;
  }

  /** Downloads a status list token; undefined when refused, offline or the server fails (the cache serves). */
  private async download(tenant: Tenant, uri: string): Promise<string | undefined> {
    if (!/^https?:\/\//.test(uri)) throw new CheckFailed('status', 'the status list uri is not http(s)');
    const outbound = this.outbound();
    if (!outbound) return undefined;
    try {
      const r = await outbound.get(tenant, uri, { accept: 'application/statuslist+jwt', timeoutMs: this.cfg.timeoutMs, maxBytes: 1_000_000 });
      if (r.status === null || r.status < 200 || r.status > 299) return undefined;
      const text = r.body.trim();
      return text.length < 1_000_000 ? text : undefined;
    } catch {
      return undefined;
    }
  }

  /** §5.1: typ statuslist+jwt, sub equal to the uri, signed by a key chained to an issuer anchor. */
  private async verify(jwt: string, uri: string, anchors: Anchor[]): Promise<void> {
    const J = await loadJose();
    let header: jose.ProtectedHeaderParameters;
    try {
      header = J.decodeProtectedHeader(jwt);
    } catch {
      throw new CheckFailed('status', 'the status list is not a JWT');
    }
    if (header.typ !== 'statuslist+jwt') throw new CheckFailed('status', 'the status list typ is not statuslist+jwt');
    const { leaf } = validateChain(
      (header.x5c ?? []).map((c) => Buffer.from(c, 'base64')),
      anchors,
      this.clock.now(),
    );
    try {
      const { payload } = await J.jwtVerify(jwt, leaf.publicKey, {
        algorithms: ['ES256', 'ES384', 'ES512', 'EdDSA'],
        currentDate: new Date(this.clock.now()),
      });
      if (payload.sub !== uri) throw new Error('sub');
    } catch {
      throw new CheckFailed('status', 'the status list signature or subject does not verify');
    }
  }
}
