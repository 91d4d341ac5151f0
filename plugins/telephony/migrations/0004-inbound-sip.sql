-- Inbound SIP: how a trunk's inbound INVITEs are recognised, the desk-phone accounts of
-- the registrar, and the inbound calls (vnum + 12 hex) with their state.
ALTER TABLE tel_trunks ADD COLUMN inbound_auth TEXT NOT NULL DEFAULT 'address' CHECK (inbound_auth IN ('address', 'digest'));

-- One SIP login per office user; the password sealed (ctx.keys.seal, aad = tenant/user), never shown again.
-- username is the digest user name the phone registers with: unique across tenants (one registrar).
CREATE TABLE tel_phones (
  tenant_id        TEXT NOT NULL,
  user             TEXT NOT NULL,
  username         TEXT NOT NULL UNIQUE,
  password_sealed  TEXT NOT NULL,
  created_at       TEXT NOT NULL,
  updated_at       TEXT NOT NULL,
  PRIMARY KEY (tenant_id, user)
) STRICT;

CREATE TABLE tel_inbound_calls (
  call_id        TEXT PRIMARY KEY,          -- vnum + 12 hex
  tenant_id      TEXT NOT NULL,
  trunk_id       TEXT NOT NULL DEFAULT '',
  did            TEXT NOT NULL DEFAULT '',
  from_number    TEXT NOT NULL DEFAULT '',
  from_name      TEXT NOT NULL DEFAULT '',
  target         TEXT NOT NULL DEFAULT '',  -- the first target: a virtual number or an office user
  number         TEXT NOT NULL DEFAULT '',  -- the virtual number whose AI took the call ('' for a user)
  caller_source  TEXT NOT NULL DEFAULT 'vnum',
  status         TEXT NOT NULL DEFAULT 'ringing',
  started_at     TEXT NOT NULL,
  answered_at    TEXT NOT NULL DEFAULT '',
  ended_at       TEXT,
  outcome        TEXT NOT NULL DEFAULT '',
  duration_sec   INTEGER NOT NULL DEFAULT 0,
  error_detail   TEXT NOT NULL DEFAULT '',
  transcript_path TEXT NOT NULL DEFAULT '',
  save_transcript INTEGER NOT NULL DEFAULT 1
) STRICT;
CREATE INDEX tel_inbound_calls_tenant ON tel_inbound_calls(tenant_id, started_at DESC);
