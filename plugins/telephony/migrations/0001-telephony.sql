-- Telephony: trunks, routes, whitelist, outbound AI calls, transcripts index, virtual numbers.
-- Every row is tenant-owned (ARCHITECTURE.md "Tenancy").

CREATE TABLE tel_trunks (
  tenant_id            TEXT NOT NULL,
  id                   TEXT NOT NULL,
  name                 TEXT NOT NULL,
  host                 TEXT NOT NULL,
  port                 INTEGER NOT NULL,
  transport            TEXT NOT NULL CHECK (transport IN ('udp', 'tcp')),
  username             TEXT NOT NULL DEFAULT '',
  password_sealed      TEXT NOT NULL DEFAULT '',   -- ctx.keys.seal, aad = tenant/trunk
  register             INTEGER NOT NULL DEFAULT 0,
  from_domain          TEXT NOT NULL DEFAULT '',
  caller_id            TEXT NOT NULL DEFAULT '',
  max_concurrent_calls INTEGER NOT NULL DEFAULT 10,
  codecs               TEXT NOT NULL DEFAULT '["PCMU","PCMA"]',
  created_at           TEXT NOT NULL,
  updated_at           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
) STRICT;

CREATE TABLE tel_settings (
  tenant_id              TEXT PRIMARY KEY,
  default_trunk_id       TEXT NOT NULL DEFAULT '',
  engine_api_key_sealed  TEXT NOT NULL DEFAULT '',
  model                  TEXT NOT NULL DEFAULT ''
) STRICT;

-- Ordered by position (spec "Route rules": ordered rows, new rows appended at the end).
CREATE TABLE tel_outbound_routes (
  tenant_id  TEXT NOT NULL,
  position   INTEGER NOT NULL,
  match      TEXT NOT NULL,
  trunk_ids  TEXT NOT NULL,    -- JSON array
  PRIMARY KEY (tenant_id, match)
) STRICT;

-- Inbound rows: first match wins; the `*` catchall is always last. (did, from_number) is not a
-- key on purpose: legacy duplicates may exist and PUT/DELETE act on the first of them.
CREATE TABLE tel_inbound_routes (
  id          INTEGER PRIMARY KEY,
  tenant_id   TEXT NOT NULL,
  position    INTEGER NOT NULL,
  did         TEXT NOT NULL,
  from_number TEXT NOT NULL DEFAULT '',
  user        TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX tel_inbound_routes_order ON tel_inbound_routes(tenant_id, position, id);

CREATE TABLE tel_whitelist (
  tenant_id  TEXT NOT NULL,
  number     TEXT NOT NULL,
  comment    TEXT NOT NULL DEFAULT '',
  added_at   TEXT NOT NULL,
  added_by   TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (tenant_id, number)
) STRICT;

CREATE TABLE tel_calls (
  call_id             TEXT PRIMARY KEY,   -- oac- + 12 hex, unique across tenants (bridge callbacks)
  tenant_id           TEXT NOT NULL,
  requested_by        TEXT NOT NULL DEFAULT '',
  phone               TEXT NOT NULL,
  display_name        TEXT NOT NULL DEFAULT '',
  email               TEXT NOT NULL DEFAULT '',
  system_prompt       TEXT NOT NULL,
  api_key_sealed      TEXT NOT NULL DEFAULT '',   -- engine key, sealed; never returned
  model               TEXT NOT NULL,
  voice               TEXT NOT NULL,
  language            TEXT NOT NULL,
  max_seconds         INTEGER NOT NULL,
  status              TEXT NOT NULL,
  created_at          TEXT NOT NULL,
  scheduled_for       TEXT,
  dispatched_at       TEXT NOT NULL DEFAULT '',
  answered_at         TEXT NOT NULL DEFAULT '',
  ended_at            TEXT,
  ended_reason        TEXT NOT NULL DEFAULT '',
  duration_sec        INTEGER NOT NULL DEFAULT 0,
  trunk_id            TEXT NOT NULL DEFAULT '',
  transcript_path     TEXT NOT NULL DEFAULT '',
  error_detail        TEXT NOT NULL DEFAULT '',
  attempt             INTEGER NOT NULL DEFAULT 0,
  retries_left        INTEGER NOT NULL DEFAULT 0,
  retry_delay_minutes INTEGER NOT NULL DEFAULT 5
) STRICT;
CREATE INDEX tel_calls_tenant ON tel_calls(tenant_id, created_at DESC);
CREATE INDEX tel_calls_status ON tel_calls(status);

-- Bridge callbacks are retried until a 2xx: (instance, seq) makes each one count once.
CREATE TABLE tel_bridge_events (
  instance  TEXT NOT NULL,
  seq       INTEGER NOT NULL,
  call_id   TEXT NOT NULL,
  type      TEXT NOT NULL,
  received  TEXT NOT NULL,
  PRIMARY KEY (instance, seq)
) STRICT;

CREATE TABLE tel_transcripts (
  tenant_id      TEXT NOT NULL,
  call_id        TEXT NOT NULL,
  caller_source  TEXT NOT NULL,
  started_utc    TEXT NOT NULL,
  ended_utc      TEXT NOT NULL,
  mtime_utc      TEXT NOT NULL,
  duration_sec   INTEGER NOT NULL,
  rule           TEXT NOT NULL DEFAULT '',
  phone          TEXT NOT NULL DEFAULT '',
  display_name   TEXT NOT NULL DEFAULT '',
  number         TEXT NOT NULL DEFAULT '',
  outcome        TEXT NOT NULL,
  voice          TEXT NOT NULL DEFAULT '',
  language       TEXT NOT NULL DEFAULT '',
  model          TEXT NOT NULL DEFAULT '',
  tokens_total   INTEGER NOT NULL DEFAULT 0,
  tokens_prompt  INTEGER NOT NULL DEFAULT 0,
  turn_count     INTEGER NOT NULL DEFAULT 0,
  size           INTEGER NOT NULL DEFAULT 0,
  file           TEXT NOT NULL,
  PRIMARY KEY (tenant_id, call_id)
) STRICT;
CREATE INDEX tel_transcripts_started ON tel_transcripts(tenant_id, started_utc DESC);

CREATE TABLE tel_numbers (
  tenant_id               TEXT NOT NULL,
  number                  TEXT NOT NULL,
  name                    TEXT NOT NULL DEFAULT '',
  mode                    TEXT NOT NULL DEFAULT 'live-voice-ai',
  voice                   TEXT NOT NULL DEFAULT 'Aoede',
  language                TEXT NOT NULL DEFAULT 'en-US',
  save_transcripts        INTEGER NOT NULL DEFAULT 1,
  max_duration_sec        INTEGER NOT NULL DEFAULT 3500,
  visibility              TEXT NOT NULL DEFAULT 'signed-in',
  system_prompt           TEXT NOT NULL DEFAULT '',
  engine_api_key_sealed   TEXT NOT NULL DEFAULT '',
  created_at              TEXT NOT NULL,
  PRIMARY KEY (tenant_id, number)
) STRICT;
