import type Database from 'better-sqlite3';
import type { DB, Tenant } from '../../server/sdk.ts';
export interface AuditRow {
  ts: string;
  event: string;
  user: string;
  ip: string;
  ua: string;
  extra: string;
}

export interface AuditFilter {
  event?: string;
  user?: string;
  since?: string;
  limit: number;
  offset: number;
  /**
   * `user` values that also match the `user` filter, compared case-insensitively: every name, id
   * and e-mail of the accounts the filter matched (see AuditService.list).
   */
  subjects?: string[];
}

/** The one style of audit event names: lower-case words joined by dashes (`webhook-pause`, `trunk-save`). */
export function eventStyle(name: string): string {
  return name.replace(/\./g, '-');
}

/** Escapes LIKE wildcards so a filter is a plain substring match. */
function likeArg(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export class AuditRepo {
  readonly #insert;
  /** Prepared statements by SQL text: a listing is a hot path, preparing costs about as much as the page query. */
  readonly #stmts = new Map<string, Database.Statement>();

  constructor(private readonly db: DB) {
    this.#insert = db.prepare('INSERT INTO audit_log (tenant_id, ts, event, user, ip, ua, extra) VALUES (?, ?, ?, ?, ?, ?, ?)');
  }

  private stmt(sql: string): Database.Statement {
    let s = this.#stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.#stmts.set(sql, s);
    }
    return s;
  }

  /** The new row's id. */
  insert(tenant: Tenant, row: AuditRow): number {
    return Number(this.#insert.run(tenant.id, row.ts, row.event, row.user, row.ip, row.ua, row.extra).lastInsertRowid);
  }

  /** Rewrites the extra of one row (an aggregated entry's count); false when it is gone (pruned). */
  setExtra(tenant: Tenant, id: number, extra: string): boolean {
    return this.stmt('UPDATE audit_log SET extra = ? WHERE id = ? AND tenant_id = ?').run(extra, id, tenant.id).changes > 0;
  }

  list(tenant: Tenant, f: AuditFilter): { rows: AuditRow[]; total: number } {
    const where = ['tenant_id = ?'];
    const args: unknown[] = [tenant.id];
    // LIKE is case-insensitive for ASCII in SQLite, which is what event names and e-mails are.
    if (f.event) {
      // Names are written with dashes; rows from before that (`webhook.pause`) keep their dots. A
      // filter reads a dot as a dash on both sides, so an old name finds old and new rows alike.
      where.push("replace(event, '.', '-') LIKE ? ESCAPE '\\'");
      args.push(likeArg(eventStyle(f.event)));
    }
    if (f.user) {
      // The accounts' identifiers go in as one JSON array: one statement text whatever their
      // number (the statement cache stays small) and no bound-parameter limit to cut them short.
      where.push("(user LIKE ? ESCAPE '\\' OR lower(user) IN (SELECT value FROM json_each(?)))");
      args.push(likeArg(f.user), JSON.stringify([...new Set((f.subjects ?? []).map((x) => x.toLowerCase()))]));
    }
    if (f.since) {
      where.push('ts > ?');
      args.push(f.since);
    }
    const w = where.join(' AND ');
    // Unfiltered: the per-tenant count the triggers of migration 0002 keep exact.
    const total =
      args.length === 1
        ? ((this.stmt('SELECT n FROM audit_counts WHERE tenant_id = ?').get(tenant.id) as { n: number } | undefined)?.n ?? 0)
        : (this.stmt(`SELECT COUNT(*) AS n FROM audit_log WHERE ${w}`).get(...args) as { n: number }).n;
    const rows = this.stmt(`SELECT ts, event, user, ip, ua, extra FROM audit_log WHERE ${w} ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?`).all(
      ...args,
      f.limit,
      f.offset,
    ) as AuditRow[];
    return { rows, total };
  }

  prune(beforeIso: string): number {
    // The triggers keep audit_counts in step; `changes` counts the audit_log rows only.
    return this.db.prepare('DELETE FROM audit_log WHERE ts < ?').run(beforeIso).changes;
  }
}
