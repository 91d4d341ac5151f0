-- Core tables: tenants and their host names, accounts, personal API keys, appliance settings,
-- the durable job queue and the event outbox.

CREATE TABLE tenants (
  id          TEXT PRIMARY KEY,
  name        TEXT NOT NULL,
  is_primary  INTEGER NOT NULL DEFAULT 0 CHECK (is_primary IN (0, 1)),
  created_at  TEXT NOT NULL
) STRICT;
-- At most one primary tenant.
CREATE UNIQUE INDEX tenants_one_primary ON tenants(is_primary) WHERE is_primary = 1;

CREATE TABLE tenant_hosts (
  host        TEXT PRIMARY KEY,           -- lower-case, without port
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  position    INTEGER NOT NULL DEFAULT 0  -- 0 = the tenant's main host name
) STRICT;
CREATE INDEX tenant_hosts_tenant ON tenant_hosts(tenant_id);

CREATE TABLE users (
  id            TEXT PRIMARY KEY,
  tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,
  email         TEXT,
  role          TEXT NOT NULL CHECK (role IN ('admin', 'user')),
  password_hash TEXT,                      -- scrypt, NULL for invited accounts
  status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'invited', 'disabled')),
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  UNIQUE (tenant_id, name)
) STRICT;
CREATE INDEX users_email ON users(tenant_id, email);

CREATE TABLE api_keys (
  id            TEXT PRIMARY KEY,
  tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name          TEXT NOT NULL DEFAULT '',
  hash          TEXT NOT NULL UNIQUE,      -- hex SHA-256 of the whole key; the key itself is never stored
  prefix        TEXT NOT NULL,             -- first characters, to recognise a key in lists
  created_at    TEXT NOT NULL,
  created_by    TEXT NOT NULL,
  last_used_at  TEXT,
  revoked_at    TEXT
) STRICT;
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);

CREATE TABLE settings (
  key    TEXT PRIMARY KEY,
  value  TEXT NOT NULL
) STRICT;

CREATE TABLE jobs (
  id            INTEGER PRIMARY KEY,
  queue         TEXT NOT NULL,
  tenant_id     TEXT,
  dedupe_key    TEXT,
  data          TEXT NOT NULL,
  state         TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed', 'cancelled')),
  run_at        INTEGER NOT NULL,          -- ms since epoch
  attempts      INTEGER NOT NULL DEFAULT 0,
  max_attempts  INTEGER NOT NULL,
  lease_owner   TEXT,
  lease_until   INTEGER,
  last_error    TEXT,
  created_at    INTEGER NOT NULL,
  finished_at   INTEGER
) STRICT;
CREATE INDEX jobs_due ON jobs(state, run_at);
CREATE UNIQUE INDEX jobs_dedupe ON jobs(queue, dedupe_key) WHERE dedupe_key IS NOT NULL;

CREATE TABLE events (
  id         INTEGER PRIMARY KEY,
  tenant_id  TEXT NOT NULL,
  name       TEXT NOT NULL,
  data       TEXT NOT NULL,
  ts         TEXT NOT NULL
) STRICT;

CREATE TABLE event_consumers (
  name     TEXT PRIMARY KEY,
  last_id  INTEGER NOT NULL
) STRICT;
