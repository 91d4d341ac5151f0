CREATE TABLE webhook_subscriptions (
  id             TEXT PRIMARY KEY,            -- 16 hex characters (spec "Webhook subscription")
  tenant_id      TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  url            TEXT NOT NULL,
  events         TEXT NOT NULL,               -- JSON array of names, or ["*"]
  active         INTEGER NOT NULL DEFAULT 1,
  secret_sealed  TEXT NOT NULL,               -- KeyService.seal, AAD = "webhook:<id>"
  created_at     TEXT NOT NULL,               -- ISO 8601 UTC
  created_by     TEXT NOT NULL,
  last_fired_at  TEXT,
  failures       INTEGER NOT NULL DEFAULT 0   -- consecutive failed deliveries
) STRICT;
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions(tenant_id, active);

-- One row per (event, subscription). The id is the X-Service-Delivery-Id / webhook-id and never
-- changes: retries, crash re-runs and manual redeliveries all reuse it.
CREATE TABLE webhook_deliveries (
  id               TEXT PRIMARY KEY,
  tenant_id        TEXT NOT NULL,
  subscription_id  TEXT NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
  event_id         INTEGER NOT NULL,
  event            TEXT NOT NULL,
  payload          TEXT NOT NULL,             -- the exact body bytes, so every retry signs the same body
  state            TEXT NOT NULL CHECK (state IN ('queued', 'pending', 'delivered', 'failed', 'skipped')),
  attempts         INTEGER NOT NULL DEFAULT 0,
  created_at       TEXT NOT NULL,
  next_try_at      TEXT,
  last_status      INTEGER,
  last_error       TEXT,
  finished_at      TEXT,
  job_id           INTEGER
) STRICT;
CREATE INDEX webhook_deliveries_sub ON webhook_deliveries(subscription_id, state, created_at, id);
-- The sweep and the health check look only at unfinished deliveries.
CREATE INDEX webhook_deliveries_open ON webhook_deliveries(state, subscription_id) WHERE state IN ('queued', 'pending');
CREATE INDEX webhook_deliveries_tenant ON webhook_deliveries(tenant_id, subscription_id, created_at DESC);

-- The delivery log: one row per HTTP attempt.
CREATE TABLE webhook_attempts (
  id           INTEGER PRIMARY KEY,
  delivery_id  TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  attempt      INTEGER NOT NULL,
  started_at   TEXT NOT NULL,
  duration_ms  INTEGER NOT NULL,
  status       INTEGER,                       -- HTTP status, null when no response
  error        TEXT,
  next_try_at  TEXT
) STRICT;
CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id);
