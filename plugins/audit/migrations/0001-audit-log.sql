CREATE TABLE audit_log (
  id         INTEGER PRIMARY KEY,
  tenant_id  TEXT NOT NULL,
  ts         TEXT NOT NULL,      -- ISO 8601 UTC
  event      TEXT NOT NULL,
  user       TEXT NOT NULL DEFAULT '',
  ip         TEXT NOT NULL DEFAULT '',
  ua         TEXT NOT NULL DEFAULT '',
  extra      TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX audit_log_tenant_ts ON audit_log(tenant_id, ts DESC, id DESC);
