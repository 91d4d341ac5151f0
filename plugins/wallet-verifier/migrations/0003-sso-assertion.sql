-- One-time, short-lived SSO assertions minted after a verified presentation (wallet sign-in).
-- Only the SHA-256 of the assertion is kept; the disclosed claims are sealed.
CREATE TABLE vp_sso_assertion (
  tenant_id      TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  hash           TEXT NOT NULL,
  session_id     TEXT NOT NULL,
  user_id        TEXT NOT NULL,
  sealed_claims  TEXT NOT NULL,
  expires_at     TEXT NOT NULL,
  used_at        TEXT,
  PRIMARY KEY (tenant_id, hash)
) STRICT;
