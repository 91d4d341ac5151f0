import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import * as jose from 'jose';
import type { Clock, DB, Tenant } from '../../server/sdk.ts';
import { type Anchor, CheckFailed, validateChain } from './x509.ts';

/**
 * Token Status List (draft-ietf-oauth-status-list §5, §8) through a cache: a copy younger than
 * `ttlSeconds` is used as is; an older one is refreshed, and when the network cannot be reached
 * (an appliance on an isolated LAN) the last verified copy keeps serving. No copy and no network:
 * the check fails, naming it.
 */
export class StatusLists {
  constructor(
    private readonly db: DB,
    private readonly clock: Clock,
    private readonly cfg: { ttlSeconds: number; timeoutMs: number },
    private readonly fetcher: (url: string, signal: AbortSignal) => Promise<Response> = (u, signal) =>
      fetch(u, { signal, headers: { accept: 'application/statuslist+jwt' } }),
  ) {}

  async status(tenant: Tenant, anchors: Anchor[], ref: { uri: string; idx: number }): Promise<number> {
    const row = this.db.prepare('SELECT jwt, fetched_at FROM vp_status_list WHERE tenant_id = ? AND uri = ?').get(tenant.id, ref.uri) as
      { jwt: string; fetched_at: string } | undefined;
    let jwt = row?.jwt;
    if (!row || this.clock.now() - Date.parse(row.fetched_at) > this.cfg.ttlSeconds * 1000) {
      const fresh = await this.download(ref.uri);
      if (fresh) {
        await this.verify(fresh, ref.uri, anchors);
        jwt = fresh;
        this.db
          .prepare(
            'INSERT INTO vp_status_list (tenant_id, uri, jwt, fetched_at) VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, uri) DO UPDATE SET jwt = excluded.jwt, fetched_at = excluded.fetched_at',
          )
          .run(tenant.id, ref.uri, fresh, new Date(this.clock.now()).toISOString());
      }
    }
    if (!jwt) throw new CheckFailed('status', `the status list ${ref.uri} cannot be fetched and no copy is cached`);
    const list = getListFromStatusListJWT(jwt);
    try {
      return list.getStatus(ref.idx);
    } catch {
      throw new CheckFailed('status', `index ${ref.idx} is outside the status list`);
    }
  }

  /** Downloads a status list token; undefined when offline or the server fails (the cache serves). */
  private async download(uri: string): Promise<string | undefined> {
    if (!/^https?:\/\//.test(uri)) throw new CheckFailed('status', 'the status list uri is not http(s)');
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(), this.cfg.timeoutMs);
    try {
      const r = await this.fetcher(uri, ac.signal);
      if (!r.ok) return undefined;
      const text = (await r.text()).trim();
      return text.length < 1_000_000 ? text : undefined;
    } catch {
      return undefined;
    } finally {
      clearTimeout(t);
    }
  }

  /** §5.1: typ statuslist+jwt, sub equal to the uri, signed by a key chained to an issuer anchor. */
  private async verify(jwt: string, uri: string, anchors: Anchor[]): Promise<void> {
    let header: jose.ProtectedHeaderParameters;
    try {
      header = jose.decodeProtectedHeader(jwt);
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
      const { payload } = await jose.jwtVerify(jwt, leaf.publicKey, {
        algorithms: ['ES256', 'ES384', 'ES512', 'EdDSA'],
        currentDate: new Date(this.clock.now()),
      });
      if (payload.sub !== uri) throw new Error('sub');
    } catch {
      throw new CheckFailed('status', 'the status list signature or subject does not verify');
    }
  }
}
