import type { DB } from '../../server/store/db.ts';
import type { Tenant } from '../../server/tenancy.ts';

export interface AuditRow { ts: string; event: string; user: string; ip: string; ua: string; extra: string }

export interface AuditFilter { event?: string; user?: string; since?: string; limit: number; offset: number }

/** Escapes LIKE wildcards so a filter is a plain substring match. */
function likeArg(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export class AuditRepo {
  readonly #insert;

  constructor(private readonly db: DB) {
    this.#insert = db.prepare('INSERT INTO audit_log (tenant_id, ts, event, user, ip, ua, extra) VALUES (?, ?, ?, ?, ?, ?, ?)');
  }

  insert(tenant: Tenant, row: AuditRow): void {
    this.#insert.run(tenant.id, row.ts, row.event, row.user, row.ip, row.ua, row.extra);
  }

  list(tenant: Tenant, f: AuditFilter): { rows: AuditRow[]; total: number } {
    const where = ['tenant_id = ?'];
    const args: unknown[] = [tenant.id];
    // LIKE is case-insensitive for ASCII in SQLite, which is what event names and e-mails are.
    if (f.event) { where.push("event LIKE ? ESCAPE '\\'"); args.push(likeArg(f.event)); }
    if (f.user) { where.push("user LIKE ? ESCAPE '\\'"); args.push(likeArg(f.user)); }
    if (f.since) { where.push('ts > ?'); args.push(f.since); }
    const w = where.join(' AND ');
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM audit_log WHERE ${w}`).get(...args) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT ts, event, user, ip, ua, extra FROM audit_log WHERE ${w} ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?`)
      .all(...args, f.limit, f.offset) as AuditRow[];
    return { rows, total };
  }

  prune(beforeIso: string): number {
    return this.db.prepare('DELETE FROM audit_log WHERE ts < ?').run(beforeIso).changes;
  }
}
