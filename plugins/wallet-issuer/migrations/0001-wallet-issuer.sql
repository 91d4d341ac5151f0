-- Keys of the wallet issuer, per tenant: the IACA (root of the mdoc / SD-JWT x5c chains) and the
-- credential signing keys (each with a document-signer certificate from the IACA). A key is either
-- sealed in software (PKCS#8 DER sealed with the master key) or in a PKCS#11 token (the PIN sealed).
-- A signing key is active while retired_at is NULL; a retired one stays published (JWKS) until
-- publish_until, so credentials signed before a rotation keep verifying (overlap).
CREATE TABLE wi_key (
  tenant_id      TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  kid            TEXT NOT NULL,
  role           TEXT NOT NULL CHECK (role IN ('iaca', 'signing')),
  key_kind       TEXT NOT NULL CHECK (key_kind IN ('software', 'pkcs11')),
  sealed_key     TEXT,
  hsm_module     TEXT,
  hsm_token      TEXT,
  hsm_key_label  TEXT,
  sealed_pin     TEXT,
  cert_der       BLOB NOT NULL,
  created_at     TEXT NOT NULL,
  retired_at     TEXT,
  publish_until  TEXT,
  PRIMARY KEY (tenant_id, kid),
  CHECK ((key_kind = 'software' AND sealed_key IS NOT NULL) OR
         (key_kind = 'pkcs11' AND hsm_module IS NOT NULL AND hsm_token IS NOT NULL AND hsm_key_label IS NOT NULL AND sealed_pin IS NOT NULL))
) STRICT;
-- At most one active key per role and tenant.
CREATE UNIQUE INDEX wi_key_active ON wi_key (tenant_id, role) WHERE retired_at IS NULL;

-- Credential offers. The subject's claims are personal data: sealed with the master key.
-- Codes are stored as SHA-256 only.
CREATE TABLE wi_offer (
  tenant_id          TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  id                 TEXT NOT NULL,
  configuration_ids  TEXT NOT NULL,            -- JSON array
  sealed_claims      TEXT NOT NULL,
  pre_auth_hash      TEXT UNIQUE,              -- SHA-256 of the pre-authorized_code
  tx_code_hash       TEXT,                     -- SHA-256 of the tx_code
  tx_code_length     INTEGER,
  tx_code_failures   INTEGER NOT NULL DEFAULT 0,
  issuer_state_hash  TEXT UNIQUE,              -- SHA-256 of issuer_state (authorization code flow)
  sealed_grant       TEXT NOT NULL,            -- the offer's code or issuer_state, sealed: GET ?offer serves it again
  created_by         TEXT NOT NULL,
  created_at         TEXT NOT NULL,
  expires_at         INTEGER NOT NULL,         -- unix seconds
  redeemed_at        TEXT,
  PRIMARY KEY (tenant_id, id)
) STRICT;

-- Pushed authorization requests (RFC 9126) and authorization codes, by hash; single use.
CREATE TABLE wi_par (
  tenant_id    TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  uri_hash     TEXT NOT NULL PRIMARY KEY,
  client_id    TEXT NOT NULL,
  params       TEXT NOT NULL,                  -- JSON of the validated request
  expires_at   INTEGER NOT NULL,
  used_at      INTEGER
) STRICT;

CREATE TABLE wi_code (
  tenant_id       TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  code_hash       TEXT NOT NULL PRIMARY KEY,
  client_id       TEXT NOT NULL,
  redirect_uri    TEXT NOT NULL,
  code_challenge  TEXT NOT NULL,
  offer_id        TEXT NOT NULL,
  configuration_ids TEXT NOT NULL,
  expires_at      INTEGER NOT NULL,
  used_at         INTEGER
) STRICT;

-- Credential access tokens (opaque, by hash) and c_nonces (single use).
CREATE TABLE wi_token (
  tenant_id          TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  token_hash         TEXT NOT NULL PRIMARY KEY,
  offer_id           TEXT NOT NULL,
  configuration_ids  TEXT NOT NULL,
  expires_at         INTEGER NOT NULL
) STRICT;

CREATE TABLE wi_nonce (
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  nonce_hash  TEXT NOT NULL PRIMARY KEY,
  expires_at  INTEGER NOT NULL
) STRICT;

-- Issued credentials and their place in the tenant's Token Status List (draft-ietf-oauth-status-list).
CREATE TABLE wi_credential (
  tenant_id    TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  id           TEXT NOT NULL,
  offer_id     TEXT NOT NULL,
  format       TEXT NOT NULL,
  list_id      INTEGER NOT NULL,
  idx          INTEGER NOT NULL,
  created_at   TEXT NOT NULL,
  expires_at   TEXT NOT NULL,
  revoked_at   TEXT,
  revoked_by   TEXT,
  PRIMARY KEY (tenant_id, id),
  UNIQUE (tenant_id, list_id, idx)
) STRICT;
CREATE INDEX wi_credential_offer ON wi_credential (tenant_id, offer_id);

-- The next free index per tenant (indices are never reused).
CREATE TABLE wi_status_counter (
  tenant_id  TEXT NOT NULL PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
  next_idx   INTEGER NOT NULL
) STRICT;
