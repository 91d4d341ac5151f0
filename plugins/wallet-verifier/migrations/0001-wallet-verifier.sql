-- The verifier's identity per tenant: a P-256 request-signing key (PKCS#8 DER sealed with the
-- master key) and its access certificate chain from the tenant's RP CA (leaf first).
CREATE TABLE vp_identity (
  tenant_id    TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
  sealed_key   TEXT NOT NULL,
  chain_der    TEXT NOT NULL,            -- JSON array of base64 DER, leaf first
  serial       TEXT NOT NULL,
  not_after    TEXT NOT NULL,
  created_at   TEXT NOT NULL
) STRICT;

-- One presentation session (vp-start .. vp-response). The ephemeral ECDH-ES key that decrypts
-- the direct_post.jwt response is sealed; it is dropped once the session is finished.
CREATE TABLE vp_session (
  tenant_id        TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  id               TEXT NOT NULL,
  preset           TEXT NOT NULL,
  client_id        TEXT NOT NULL,
  scope            TEXT NOT NULL,
  network_profile  TEXT,
  nonce            TEXT NOT NULL,
  state            TEXT NOT NULL,
  response_mode    TEXT NOT NULL,
  sealed_enc_key   TEXT,
  enc_jwk_thumb    TEXT,
  status           TEXT NOT NULL CHECK (status IN ('pending', 'requested', 'verified', 'error')),
  request_fetched  INTEGER NOT NULL DEFAULT 0,
  result           TEXT,                 -- JSON VpResponseResult once finished
  response_hash    TEXT,                 -- SHA-256 of the vp_token (replay refusal)
  created_at       TEXT NOT NULL,
  expires_at       TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
) STRICT;
CREATE INDEX vp_session_expiry ON vp_session (expires_at);

-- Every vp_token ever accepted (by hash), so a replay into a fresh session is refused too.
CREATE TABLE vp_seen_token (
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  hash        TEXT NOT NULL,
  seen_at     TEXT NOT NULL,
  PRIMARY KEY (tenant_id, hash)
) STRICT;

-- Issuer trust anchors an administrator added for this tenant (besides the LOTL's).
CREATE TABLE vp_trust_anchor (
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  sha256      TEXT NOT NULL,             -- lower-case hex of the DER
  subject     TEXT NOT NULL,
  not_after   TEXT NOT NULL,
  der         BLOB NOT NULL,
  added_by    TEXT NOT NULL,
  added_at    TEXT NOT NULL,
  PRIMARY KEY (tenant_id, sha256)
) STRICT;

-- Token status lists (IETF OAuth Status List) by URI: the last good copy serves while offline.
CREATE TABLE vp_status_list (
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  uri         TEXT NOT NULL,
  jwt         TEXT NOT NULL,
  fetched_at  TEXT NOT NULL,
  PRIMARY KEY (tenant_id, uri)
) STRICT;

-- The verifier's own audit trail (vp-start .. vp-sso-minted), served by ?list-vp-events; every
-- entry is also written to the appliance audit log.
CREATE TABLE vp_event (
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  ts          TEXT NOT NULL,
  event       TEXT NOT NULL,
  session_id  TEXT,
  ip          TEXT NOT NULL,
  ua          TEXT NOT NULL,
  extra       TEXT NOT NULL            -- key=value tail, as the audit entry's `extra`
) STRICT;
CREATE INDEX vp_event_tenant_ts ON vp_event (tenant_id, ts);
