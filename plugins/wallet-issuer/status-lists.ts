import { NotFoundError, type Tenant } from '../../server/sdk.ts';
import { endpoints } from './metadata.ts';
import { IssuerPart, type IssuerBase } from './part.ts';
import type { CredentialRow } from './repo.ts';
import type { CredentialRowWriter } from './row-writer.ts';
import { statusListToken } from './status-list.ts';

const STATUS_BLOCK = 64;
const STATUS_BLOCK_MAX = 4096;

/**
 * The Token Status List (draft-ietf-oauth-status-list) of issued credentials and their
 * revocation: status positions, the signed list token, one entry's status, revoking. Everything
 * that reads credential rows writes the pending ones first (row-writer.ts).
 */
export class StatusLists extends IssuerPart {
  readonly #statusCache = new Map<string, { jwt: string; until: number; revoked: number }>();

  constructor(
    base: IssuerBase,
    private readonly rows: CredentialRowWriter,
  ) {
    super(base);
  }

  readonly #statusBlocks = new Map<string, { next: number; end: number; size: number; at: number }>();

  /**
   * The next status list position. Positions are reserved from the database in blocks (one
   * committed write per block, not per credential); a block left unused at a restart is skipped,
   * never reused. A block starts at 64 positions; one used up within a second is followed by one
   * twice its size, up to 4096, so a burst of issuance commits a reservation every few thousand
   * credentials rather than every 64 (each such commit cost about a tenth of a signature per
   * credential), while a quiet appliance still skips at most 63 positions when it stops.
   */
  reserveStatus(tenant: Tenant): { listId: number; idx: number } {
    let b = this.#statusBlocks.get(tenant.id);
    if (!b || b.next >= b.end) {
      const at = performance.now();
      const size = b && at - b.at < 1000 ? Math.min(b.size * 2, STATUS_BLOCK_MAX) : STATUS_BLOCK;
      const first = this.repo.reserveStatusIndices(tenant, size);
      b = { next: first, end: first + size, size, at };
      this.#statusBlocks.set(tenant.id, b);
    }
    const n = b.next++;
    return { listId: Math.floor(n / this.d.config.statusListSize) + 1, idx: n % this.d.config.statusListSize };
  }

  /** The signed Status List Token of list `listId` (cached per tenant and list until revocation or its ttl). */
  async statusList(tenant: Tenant, origin: string, listId: number): Promise<string> {
    this.rows.flushCredentials();
    const uri = endpoints(origin).statusList(listId);
    const cacheKey = `${tenant.id}|${uri}`;
    const hit = this.#statusCache.get(cacheKey);
    const revoked = this.repo.revokedCount(tenant, listId);
    if (hit && hit.until > this.d.clock.now() && hit.revoked === revoked) return hit.jwt;
    const key = await this.keys.active(tenant);
    const jwt = await statusListToken({
      signer: key.signer,
      kid: key.kid,
      x5c: [key.certDer.toString('base64')],
      uri,
      size: this.d.config.statusListSize,
      revoked: this.repo.revokedIndices(tenant, listId),
      iat: this.nowSec(),
      ttl: this.d.config.statusListTtlSec,
    });
    this.#statusCache.set(cacheKey, { jwt, revoked, until: this.d.clock.now() + 1000 * Math.min(60, this.d.config.statusListTtlSec) });
    return jwt;
  }

  /** The status of one entry: 0 VALID, 1 INVALID (revoked); undefined when no credential has it. */
  status(tenant: Tenant, listId: number, idx: number): 0 | 1 | undefined {
    this.rows.flushCredentials();
    const r = this.d.db.prepare('SELECT revoked_at FROM wi_credential WHERE tenant_id = ? AND list_id = ? AND idx = ?').get(tenant.id, listId, idx) as
      { revoked_at: string | null } | undefined;
    if (!r) return undefined;
    return r.revoked_at ? 1 : 0;
  }

  revoke(tenant: Tenant, by: { credentialId?: string; offerId?: string }, who: string): string[] {
    this.rows.flushCredentials();
    if (by.credentialId !== undefined && !this.repo.credential(tenant, by.credentialId)) throw new NotFoundError(`no credential ${by.credentialId}`);
    if (by.offerId !== undefined && !this.repo.offer(tenant, by.offerId)) throw new NotFoundError(`no offer ${by.offerId}`);
    // The next status list fetch sees the new revoked count and rebuilds the list.
    return this.repo.revoke(tenant, by, new Date(this.d.clock.now()).toISOString(), who);
  }

  credentials(tenant: Tenant, opts: { offerId?: string; limit: number; offset: number }): { items: CredentialRow[]; total: number } {
    this.rows.flushCredentials();
    return this.repo.credentials(tenant, opts);
  }
}
