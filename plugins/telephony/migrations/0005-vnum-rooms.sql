-- Browser visits of virtual-number rooms (README "Virtual-number rooms"): one row per visitor
-- call (`vnum` + 12 hex), so the bridge's events find their tenant and number, and the visitor's
-- leave request is checked against the hash of the token the join answered (never stored plain).
CREATE TABLE tel_room_calls (
  call_id          TEXT PRIMARY KEY,
  tenant_id        TEXT NOT NULL,
  number           TEXT NOT NULL,
  room             TEXT NOT NULL,
  visitor          TEXT NOT NULL DEFAULT '',   -- the signed-in visitor's user name; '' in a public room
  visitor_ip       TEXT NOT NULL DEFAULT '',
  leave_hash       TEXT NOT NULL,              -- hex SHA-256 of the leave token
  voice            TEXT NOT NULL DEFAULT '',
  language         TEXT NOT NULL DEFAULT '',
  model            TEXT NOT NULL DEFAULT '',
  save_transcripts INTEGER NOT NULL DEFAULT 1,
  started_at       TEXT NOT NULL,
  connected_at     TEXT,
  ended_at         TEXT,
  outcome          TEXT,
  duration_sec     INTEGER NOT NULL DEFAULT 0,
  error_detail     TEXT NOT NULL DEFAULT '',
  transcript_file  TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX tel_room_calls_tenant ON tel_room_calls(tenant_id, started_at DESC);
