-- One certificate authority per tenant. The key is either sealed in software (PKCS#8 DER sealed
-- with the master key) or in a PKCS#11 token (module, token label, key label; the PIN sealed).
CREATE TABLE rp_ca (
  tenant_id        TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
  key_kind         TEXT NOT NULL CHECK (key_kind IN ('software', 'pkcs11')),
  sealed_key       TEXT,
  hsm_module       TEXT,
  hsm_token        TEXT,
  hsm_key_label    TEXT,
  sealed_pin       TEXT,
  cert_der         BLOB NOT NULL,
  generation       INTEGER NOT NULL DEFAULT 1,  -- bumped when the CA is replaced (ca init --force)
  crl_number       INTEGER NOT NULL DEFAULT 0,  -- RFC 5280 §5.2.3: never reused, only grows
  crl_der          BLOB,
  crl_next_update  TEXT,
  crl_stale        INTEGER NOT NULL DEFAULT 1,  -- a revocation since the last CRL
  created_at       TEXT NOT NULL,
  updated_at       TEXT NOT NULL,
  CHECK ((key_kind = 'software' AND sealed_key IS NOT NULL) OR
         (key_kind = 'pkcs11' AND hsm_module IS NOT NULL AND hsm_token IS NOT NULL AND hsm_key_label IS NOT NULL AND sealed_pin IS NOT NULL))
) STRICT;

-- Certificates the CA issued. Private keys are never stored here (include_key returns it once).
CREATE TABLE rp_cert (
  tenant_id          TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  serial             TEXT NOT NULL,            -- lower-case hex, as in the certificate
  ca_generation      INTEGER NOT NULL,
  purpose            TEXT NOT NULL CHECK (purpose IN ('rp', 'tls')),
  client_id          TEXT NOT NULL,
  subject            TEXT NOT NULL,
  names              TEXT NOT NULL,            -- JSON array of SAN entries
  not_before         TEXT NOT NULL,
  not_after          TEXT NOT NULL,
  x509_hash          TEXT NOT NULL,
  key_source         TEXT NOT NULL CHECK (key_source IN ('generated', 'csr', 'public_key')),
  cert_der           BLOB NOT NULL,
  issued_by          TEXT NOT NULL DEFAULT '',
  revoked_at         TEXT,
  revocation_reason  TEXT,
  created_at         TEXT NOT NULL,
  PRIMARY KEY (tenant_id, serial)
) STRICT;
CREATE INDEX rp_cert_tenant_created ON rp_cert(tenant_id, created_at DESC);

-- The appliance's own HTTPS certificate (one per appliance, from the primary tenant's CA).
CREATE TABLE rp_tls (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  serial      TEXT NOT NULL,
  cert_pem    TEXT NOT NULL,                   -- leaf then CA
  sealed_key  TEXT NOT NULL,
  names       TEXT NOT NULL,                   -- JSON array, sorted: renew when it changes
  not_before  TEXT NOT NULL,
  not_after   TEXT NOT NULL,
  updated_at  TEXT NOT NULL
) STRICT;
