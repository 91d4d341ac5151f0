-- Share links of transcripts: a public, read-only page at an unguessable URL (README "Transcript
-- sharing"). The token is kept only as its SHA-256, like API keys (ARCHITECTURE.md "Storage"): it is
-- shown once, at creation. token_tail (its last 8 characters) recognises a link in lists and events
-- without letting anyone open it.
-- No foreign key to tel_transcripts on purpose: a transcript row is re-saved with INSERT OR REPLACE,
-- whose implicit delete would cascade and silently drop every link of the transcript.
CREATE TABLE tel_transcript_shares (
  id              TEXT PRIMARY KEY,            -- shr_ + 16 hex: addresses a share in the v1 API
  tenant_id       TEXT NOT NULL,
  call_id         TEXT NOT NULL,
  token_hash      TEXT NOT NULL UNIQUE,        -- hex SHA-256 of the token; the page looks it up by this
  token_tail      TEXT NOT NULL,
  ttl_hours       INTEGER NOT NULL CHECK (ttl_hours >= 0),   -- 0 = never expires
  created_at      TEXT NOT NULL,
  created_by      TEXT NOT NULL,
  expires_at      TEXT,                        -- NULL when ttl_hours is 0
  revoked_at      TEXT,
  revoked_by      TEXT,
  views           INTEGER NOT NULL DEFAULT 0,
  last_viewed_at  TEXT
) STRICT;
CREATE INDEX tel_transcript_shares_call ON tel_transcript_shares(tenant_id, call_id, created_at DESC);
