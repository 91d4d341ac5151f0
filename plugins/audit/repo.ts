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

/** An entry as GET /auditlog answers it: the row with the host of the tenant it belongs to. */
export interface AuditEntry {
  ts: string;
  event: string;
  tenant: string;
  user: string;
  ip: string;
  ua: string;
  extra: string;
}

/** The columns of a listing: the stored row, or the answer's entry (the tenant's host bound as `tenant`, in the answer's key order). */
const ROW_COLUMNS = 'ts, event, user, ip, ua, extra';
const ENTRY_COLUMNS = 'ts, event, ? AS tenant, user, ip, ua, extra';
/** The unfiltered listing's statements, their text made once (a cached statement is found by it). */
const COUNT_SQL = 'SELECT n FROM audit_counts WHERE tenant_id = ?';
const PAGE_SQL = (columns: string) => `SELECT ${columns} FROM audit_log WHERE tenant_id = ? ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?`;
const ROWS_PAGE_SQL = PAGE_SQL(ROW_COLUMNS);
const ENTRIES_PAGE_SQL = PAGE_SQL(ENTRY_COLUMNS);

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
    return this.query(tenant, f, undefined) as { rows: AuditRow[]; total: number };
  }

  /**
   * A page as GET /auditlog answers it: each row already carries the tenant's host, so a listing
   * builds no second object per row.
   */
  entries(tenant: Tenant, f: AuditFilter): { rows: AuditEntry[]; total: number } {
    return this.query(tenant, f, tenant.host) as { rows: AuditEntry[]; total: number };
  }

  private query(tenant: Tenant, f: AuditFilter, host: string | undefined): { rows: unknown[]; total: number } {
    if (!f.event && !f.user && !f.since) {
      // Unfiltered (the common listing): the per-tenant count the triggers of migration 0002 keep exact.
      const total = (this.stmt(COUNT_SQL).get(tenant.id) as { n: number } | undefined)?.n ?? 0;
      const rows =
        host === undefined ? this.stmt(ROWS_PAGE_SQL).all(tenant.id, f.limit, f.offset) : this.stmt(ENTRIES_PAGE_SQL).all(host, tenant.id, f.limit, f.offset);
      return { rows, total };
    }
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
    const columns = host === undefined ? ROW_COLUMNS : ENTRY_COLUMNS;
    const head: unknown[] = host === undefined ? [] : [host];
    const total = (this.stmt(`SELECT COUNT(*) AS n FROM audit_log WHERE ${w}`).get(...args) as { n: number }).n;
    const rows = this.stmt(`SELECT ${columns} FROM audit_log WHERE ${w} ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?`).all(...head, ...args, f.limit, f.offset);
    return { rows, total };
  }

  prune(beforeIso: string): number {
    // The triggers keep audit_counts in step; `changes` counts the audit_log rows only.
    return this.db.prepare('DELETE FROM audit_log WHERE ts < ?').run(beforeIso).changes;
  }
}
