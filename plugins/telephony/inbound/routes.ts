import { ConflictError, InputError, NotFoundError, type Tenant } from '../../../server/sdk.ts';
import type { TelephonyRepo } from '../repo.ts';
import type { InboundRouteRow } from '../routing.ts';
import { checkTenantLimit, DEFAULT_LIMITS } from '../schemas.ts';

const CATCHALL = '*';
/** The catchall row is Did `*` without a caller filter; a `*` row with a FromNumber is an ordinary row. */
const isCatchall = (r: { did: string; fromNumber: string }) => r.did === CATCHALL && r.fromNumber === '';

/**
 * The spec's inbound routes ("Route rules" 1-6): rows of (Did, FromNumber, User) in evaluation
 * order, first match wins, the `*` catchall last and undeletable. The bridge's question of where
 * an INVITE goes is answered from them (calls.ts `decide`).
 */
export class InboundRoutes {
  constructor(
    private readonly repo: TelephonyRepo,
    /** The plugin's `limits.routes`: rows per tenant, the `*` catchall not counted. */
    private readonly maxRoutes: number = DEFAULT_LIMITS.routes,
    /** Why a User cannot take calls (calls.ts `unusable`), or null; a save naming one is 400. */
    private readonly unusable: (t: Tenant, user: string) => string | null = () => null,
  ) {}

  /** 400 naming `user` and the reason, for a target no call could reach. */
  private checkTarget(t: Tenant, user: string): void {
    const why = this.unusable(t, user);
    if (why) throw new InputError(`invalid field user: ${why}`, 'invalid_request', { field: 'user' });
  }

  /** The rows in evaluation order, with the `*` catchall auto-inserted when missing (rule 2). */
  rows(t: Tenant): (InboundRouteRow & { id: number; position: number })[] {
    let rows = this.repo.inboundRoutes(t);
    if (!rows.some(isCatchall)) {
      this.repo.tx(() => {
        if (this.repo.inboundRoutes(t).some(isCatchall)) return;
        const last = rows.length ? rows[rows.length - 1]!.position : 0;
        this.repo.insertInbound(t, last + 1000, { did: CATCHALL, fromNumber: '', user: '' });
      });
      rows = this.repo.inboundRoutes(t);
    }
    return rows;
  }

  /**
   * Rule 4: (Did, FromNumber) addresses a row; PUT/DELETE act on the first match (legacy
   * duplicates). Without fromNumber the row without a caller filter is meant (the pair POST makes
   * when FromNumber is left out); only when the Did has no such row, its first row.
   */
  private findInbound(t: Tenant, did: string, fromNumber: string | undefined) {
    const rows = this.rows(t).filter((r) => r.did === did);
    if (fromNumber !== undefined) return rows.find((r) => r.fromNumber === fromNumber);
    return rows.find((r) => r.fromNumber === '') ?? rows[0];
  }

  one(t: Tenant, did: string, fromNumber?: string): InboundRouteRow {
    const r = this.findInbound(t, did, fromNumber);
    if (!r) throw new NotFoundError(`no inbound route for Did ${did}${fromNumber ? ` and FromNumber ${fromNumber}` : ''}`);
    return strip(r);
  }

  /** Rule 3: inserted just before the catchall; a duplicate pair answers 409 duplicate_route. */
  add(t: Tenant, r: InboundRouteRow): InboundRouteRow {
    this.checkTarget(t, r.user);
    return this.repo.tx(() => {
      const rows = this.rows(t);
      if (rows.some((x) => x.did === r.did && x.fromNumber === r.fromNumber)) {
        throw new ConflictError('duplicate_route', `an inbound route for Did ${r.did}${r.fromNumber ? ` and FromNumber ${r.fromNumber}` : ''} exists`);
      }
      checkTenantLimit('routes', this.maxRoutes, rows.filter((x) => !isCatchall(x)).length);
      const catchIdx = rows.findIndex(isCatchall);
      // Renumber in steps so the new row lands right before the catchall, in one transaction.
      const ordered = [...rows];
      ordered.splice(catchIdx < 0 ? ordered.length : catchIdx, 0, { ...r, id: -1, position: 0 });
      ordered.forEach((x, i) => {
        if (x.id === -1) this.repo.insertInbound(t, (i + 1) * 10, r);
        else if (x.position !== (i + 1) * 10) this.repo.setInboundPosition(t, x.id, (i + 1) * 10);
      });
      return r;
    });
  }

  /** Only User is editable (rule 4). */
  update(t: Tenant, did: string, fromNumber: string | undefined, user: string): InboundRouteRow {
    this.checkTarget(t, user);
    const r = this.findInbound(t, did, fromNumber);
    if (!r) throw new NotFoundError(`no inbound route for Did ${did}${fromNumber ? ` and FromNumber ${fromNumber}` : ''}`);
    this.repo.updateInboundUser(t, r.id, user);
    return { did: r.did, fromNumber: r.fromNumber, user };
  }

  remove(t: Tenant, did: string, fromNumber: string | undefined): InboundRouteRow {
    const r = this.findInbound(t, did, fromNumber);
    if ((r && isCatchall(r)) || (!r && did === CATCHALL && !fromNumber)) {
      throw new InputError('the * catchall inbound route cannot be deleted; PUT it to change its User', 'cannot_delete_catchall');
    }
    if (!r) throw new NotFoundError(`no inbound route for Did ${did}${fromNumber ? ` and FromNumber ${fromNumber}` : ''}`);
    this.repo.deleteInbound(t, r.id);
    return strip(r);
  }
}

function strip(r: InboundRouteRow): InboundRouteRow {
  return { did: r.did, fromNumber: r.fromNumber, user: r.user };
}
