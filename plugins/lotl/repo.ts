import type { DB } from '../../server/sdk.ts';
import type { TslPointer, TslService } from './tsl.ts';
import { sha256Hex } from './xades.ts';

/**
 * SQL of the trusted-list cache. Appliance-wide tables (no tenant argument): the EU trusted
 * lists are public and the same for every tenant; see README "Why appliance-wide".
 */

export interface ListRow {
  territory: string;
  is_lotl: number;
  sequence: number;
  version: number;
  issued: string;
  next_update: string | null;
  signature_alg: string;
  signer_sha256: string;
  signing_time: string | null;
  operator: string;
  source: string;
  doc_sha256: string;
  tsp_count: number;
  service_count: number;
  accepted_at: string;
}

export interface ResultRow {
  territory: string;
  at: string;
  outcome: 'accepted' | 'unchanged' | 'rejected' | 'failed';
  reason: string | null;
  detail: string | null;
  signature: 'valid' | 'untrusted_signer' | 'invalid' | 'not_checked';
  source: string;
  sequence: number | null;
  issued: string | null;
  next_update: string | null;
}

export interface AnchorRow {
  territory: string;
  sha256: string;
  tsp_name: string;
  service_name: string;
  service_type: string;
  status: string;
  status_since: string;
}

export interface PointerRow {
  territory: string;
  location: string;
  mime_type: string;
  tsl_type: string;
  signers: string;
}

export class LotlRepo {
  constructor(private readonly db: DB) {}

  list(territory: string): ListRow | undefined {
    return this.db.prepare('SELECT * FROM lotl_lists WHERE territory = ?').get(territory) as ListRow | undefined;
  }

  lists(): ListRow[] {
    return this.db.prepare('SELECT * FROM lotl_lists ORDER BY is_lotl DESC, territory').all() as ListRow[];
  }

  results(): ResultRow[] {
    return this.db.prepare('SELECT * FROM lotl_results ORDER BY territory').all() as ResultRow[];
  }

  recordResult(r: ResultRow): void {
    this.db
      .prepare(
        `INSERT INTO lotl_results (territory, at, outcome, reason, detail, signature, source, sequence, issued, next_update)
                VALUES (@territory, @at, @outcome, @reason, @detail, @signature, @source, @sequence, @issued, @next_update)
                ON CONFLICT(territory) DO UPDATE SET at = excluded.at, outcome = excluded.outcome, reason = excluded.reason,
                  detail = excluded.detail, signature = excluded.signature, source = excluded.source, sequence = excluded.sequence,
                  issued = excluded.issued, next_update = excluded.next_update`,
      )
      .run(r);
  }

  /** Replaces a list and all its anchors in one transaction (never half a list). */
  saveList(row: ListRow, services: TslService[], result: ResultRow): void {
    const tx = this.db.transaction(() => {
      this.db.prepare('DELETE FROM lotl_anchors WHERE territory = ?').run(row.territory);
      this.db
        .prepare(
          `INSERT INTO lotl_lists (territory, is_lotl, sequence, version, issued, next_update, signature_alg, signer_sha256, signing_time,
                    operator, source, doc_sha256, tsp_count, service_count, accepted_at)
                  VALUES (@territory, @is_lotl, @sequence, @version, @issued, @next_update, @signature_alg, @signer_sha256, @signing_time,
                    @operator, @source, @doc_sha256, @tsp_count, @service_count, @accepted_at)
                  ON CONFLICT(territory) DO UPDATE SET is_lotl = excluded.is_lotl, sequence = excluded.sequence, version = excluded.version,
                    issued = excluded.issued, next_update = excluded.next_update, signature_alg = excluded.signature_alg,
                    signer_sha256 = excluded.signer_sha256, signing_time = excluded.signing_time, operator = excluded.operator,
                    source = excluded.source, doc_sha256 = excluded.doc_sha256, tsp_count = excluded.tsp_count,
                    service_count = excluded.service_count, accepted_at = excluded.accepted_at`,
        )
        .run(row);
      const ins = this.db.prepare(`INSERT INTO lotl_anchors (territory, sha256, tsp_name, service_name, service_type, status, status_since, der)
                                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)`);
      for (const s of services) {
        for (const der of s.certificates) ins.run(row.territory, sha256Hex(der), s.tspName, s.serviceName, s.serviceType, s.status, s.statusSince, der);
      }
      this.recordResult(result);
      this.bumpGeneration();
    });
    tx();
  }

  /** Tells every reader (this node or another on the same database) that the anchors changed. */
  bumpGeneration(): void {
    this.db
      .prepare("INSERT INTO lotl_state (key, value) VALUES ('generation', '1') ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")
      .run();
  }

  replacePointers(pointers: TslPointer[]): void {
    const tx = this.db.transaction(() => {
      this.db.prepare('DELETE FROM lotl_pointers').run();
      const ins = this.db.prepare('INSERT INTO lotl_pointers (territory, location, mime_type, tsl_type, signers) VALUES (?, ?, ?, ?, ?)');
      for (const p of pointers) ins.run(p.territory, p.location, p.mimeType, p.tslType, JSON.stringify(p.signers.map((d) => d.toString('base64'))));
    });
    tx();
  }

  pointers(): PointerRow[] {
    return this.db.prepare('SELECT territory, location, mime_type, tsl_type, signers FROM lotl_pointers ORDER BY id').all() as PointerRow[];
  }

  /** Anchors of the given lists (the ones in service), optionally one territory. */
  anchors(territories: string[], country?: string): AnchorRow[] {
    const ts = country ? territories.filter((t) => t === country) : territories;
    if (!ts.length) return [];
    return this.db
      .prepare(
        `SELECT territory, sha256, tsp_name, service_name, service_type, status, status_since FROM lotl_anchors
                WHERE territory IN (SELECT value FROM json_each(?)) ORDER BY territory, sha256, id`,
      )
      .all(JSON.stringify(ts)) as AnchorRow[];
  }

  anchorsBySha(sha256: string, territories: string[]): AnchorRow[] {
    return this.db
      .prepare(
        `SELECT territory, sha256, tsp_name, service_name, service_type, status, status_since FROM lotl_anchors
                WHERE sha256 = ? AND territory IN (SELECT value FROM json_each(?)) ORDER BY territory, id`,
      )
      .all(sha256, JSON.stringify(territories)) as AnchorRow[];
  }

  anchorDers(territories: string[]): { sha256: string; der: Buffer }[] {
    return this.db.prepare('SELECT sha256, der FROM lotl_anchors WHERE territory IN (SELECT value FROM json_each(?))').all(JSON.stringify(territories)) as {
      sha256: string;
      der: Buffer;
    }[];
  }

  distinctAnchorCount(territories: string[]): number {
    if (!territories.length) return 0;
    const r = this.db
      .prepare('SELECT COUNT(DISTINCT sha256) AS n FROM lotl_anchors WHERE territory IN (SELECT value FROM json_each(?))')
      .get(JSON.stringify(territories)) as { n: number };
    return r.n;
  }

  getState(key: string): string | undefined {
    return (this.db.prepare('SELECT value FROM lotl_state WHERE key = ?').get(key) as { value: string } | undefined)?.value;
  }

  setState(key: string, value: string): void {
    this.db.prepare('INSERT INTO lotl_state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value').run(key, value);
  }
}
