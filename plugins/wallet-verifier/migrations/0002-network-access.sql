-- Network access profiles per tenant (spec NetworkConfig): what a verified PID presentation with
-- scope network_access turns into.
CREATE TABLE vp_network_profile (
  tenant_id          TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  name               TEXT NOT NULL,
  network_type       TEXT NOT NULL,
  ssid               TEXT,
  eap_method         TEXT,
  identity_template  TEXT NOT NULL,
  ttl_minutes        INTEGER NOT NULL,
  created_at         TEXT NOT NULL,
  PRIMARY KEY (tenant_id, name)
) STRICT;

-- The NetworkConfig issued for a session: served again unchanged until it expires (idempotent).
-- The body holds an ephemeral credential: sealed with the master key.
CREATE TABLE vp_network_config (
  tenant_id    TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  session_id   TEXT NOT NULL,
  sealed_body  TEXT NOT NULL,
  expires_at   TEXT NOT NULL,
  PRIMARY KEY (tenant_id, session_id)
) STRICT;
