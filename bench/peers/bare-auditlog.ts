/**
 * The peer of bench/core.bench.ts: the least a server can do to answer
 * `GET /api.ashx/v1/auditlog?limit=50` honestly. Bare Express 5 + better-sqlite3 on the
 * appliance's own database file, with the same SQL (key lookup by SHA-256 hash joined to its
 * user, the tenant's row count and the page query) and the same JSON, but no plugin host, no schema
 * validation, no logging, no rate limiting and statements prepared once.
 *
 * env: BENCH_DB (path of appliance.db), PORT.
 */
import crypto from 'node:crypto';
import Database from 'better-sqlite3';
import express from 'express';

const db = new Database(process.env.BENCH_DB!);
db.pragma('journal_mode = WAL');
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');

const keyByHash = db.prepare(`SELECT k.id, k.tenant_id, k.user_id, k.revoked_at, k.hash, u.name, u.email, u.role, u.status
                              FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.hash = ?`);
// The unfiltered total as plugins/audit/repo.ts reads it (the per-tenant count its triggers keep).
const count = db.prepare('SELECT n FROM audit_counts WHERE tenant_id = ?');
const page = db.prepare('SELECT ts, event, user, ip, ua, extra FROM audit_log WHERE tenant_id = ? ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?');
const hostOf = new Map(
  (db.prepare('SELECT tenant_id, host FROM tenant_hosts ORDER BY position DESC').all() as { tenant_id: string; host: string }[]).map((r) => [
    r.tenant_id,
    r.host,
  ]),
);

interface KeyRow {
  tenant_id: string;
  revoked_at: string | null;
  role: string;
  status: string;
}
interface AuditRow {
  ts: string;
  event: string;
  user: string;
  ip: string;
  ua: string;
  extra: string;
}

const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.get('/api.ashx/v1/auditlog', (req, res) => {
  const m = /^Bearer\s+(ak_[A-Za-z0-9_-]+)\s*$/i.exec(req.headers.authorization ?? '');
  const key = m ? (keyByHash.get(crypto.createHash('sha256').update(m[1]!).digest('hex')) as KeyRow | undefined) : undefined;
  if (!key || key.revoked_at || key.status === 'disabled') {
    res.status(401).json({ error: 'invalid_token', error_description: 'invalid or revoked API key' });
    return;
  }
  if (key.role !== 'admin') {
    res.status(403).json({ error: 'forbidden', error_description: 'role admin required' });
    return;
  }
  const limit = Math.min(Number(req.query.limit ?? 50) || 50, 500);
  const offset = Number(req.query.offset ?? 0) || 0;
  const total = (count.get(key.tenant_id) as { n: number } | undefined)?.n ?? 0;
  const rows = page.all(key.tenant_id, limit, offset) as AuditRow[];
  const tenant = hostOf.get(key.tenant_id);
  let next: string | null = null;
  if (offset + rows.length < total && rows.length > 0) {
    const u = new URL(req.originalUrl, 'http://x');
    u.searchParams.set('limit', String(limit));
    u.searchParams.set('offset', String(offset + limit));
    next = u.pathname + u.search;
  }
  res.setHeader('Cache-Control', 'no-store');
  res.json({ data: rows.map((r) => ({ ts: r.ts, event: r.event, tenant, user: r.user, ip: r.ip, ua: r.ua, extra: r.extra })), total, limit, offset, next });
});
app.get('/readyz', (_req, res) => {
  res.json({ status: 'ready' });
});

const server = app.listen(Number(process.env.PORT), '127.0.0.1');
process.once('SIGTERM', () => {
  server.close(() => {
    db.close();
    process.exit(0);
  });
  server.closeAllConnections();
});
