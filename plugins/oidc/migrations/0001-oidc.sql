-- Per-tenant signing keys. The private JWK is sealed with the master key (AAD = tenant|kid).
-- `state`: 'active' signs new tokens; 'retiring' is still published in the JWKS until
-- `retire_after` so tokens signed before a rotation keep verifying (rotation with overlap).
CREATE TABLE oidc_keys (
  tenant_id TEXT NOT NULL,
  kid TEXT NOT NULL,
  alg TEXT NOT NULL,
  public_jwk TEXT NOT NULL,
  private_sealed TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at TEXT NOT NULL,
  retire_after TEXT,
  PRIMARY KEY (tenant_id, kid)
) STRICT;

CREATE TABLE oidc_clients (
  tenant_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  name TEXT NOT NULL,
  secret_hash TEXT,
  auth_method TEXT NOT NULL,
  redirect_uris TEXT NOT NULL,
  post_logout_redirect_uris TEXT NOT NULL,
  grant_types TEXT NOT NULL,
  jwks TEXT,
  allow_plain_pkce INTEGER NOT NULL DEFAULT 1,
  id_token_alg TEXT NOT NULL DEFAULT 'RS256',
  skip_consent INTEGER NOT NULL DEFAULT 0,
  builtin INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (tenant_id, client_id)
) STRICT;

-- A grant is what one authorization (or one password/jwt-bearer exchange) gave a client. Tokens
-- carry its id, so revoking the grant revokes every token it produced (code reuse, refresh reuse).
CREATE TABLE oidc_grants (
  grant_id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  user_id TEXT,
  scope TEXT NOT NULL,
  created_at TEXT NOT NULL,
  revoked_at TEXT
) STRICT;

-- Authorization codes, stored by SHA-256. used_at set on first exchange (single use).
CREATE TABLE oidc_codes (
  code_hash TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  grant_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  scope TEXT NOT NULL,
  nonce TEXT,
  code_challenge TEXT,
  code_challenge_method TEXT,
  auth_time INTEGER NOT NULL,
  sid TEXT,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
) STRICT;

-- Refresh tokens, stored by SHA-256; rotation marks the old one used, a second use of a used
-- token revokes the whole grant (RFC 9700 §4.14.2 reuse detection).
CREATE TABLE oidc_refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  grant_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  auth_time INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
) STRICT;
CREATE INDEX oidc_refresh_grant ON oidc_refresh_tokens (grant_id);

-- Access tokens revoked before their expiry, by jti (kept until exp).
CREATE TABLE oidc_revoked_jti (
  jti TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  exp INTEGER NOT NULL
) STRICT;

-- jti of client assertions and jwt-bearer assertions seen, against replay (RFC 7523 §3 item 7).
CREATE TABLE oidc_assertion_jti (
  tenant_id TEXT NOT NULL,
  issuer TEXT NOT NULL,
  jti TEXT NOT NULL,
  exp INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, issuer, jti)
) STRICT;

-- Browser sign-in sessions, by SHA-256 of the cookie value. One browser session may hold several
-- signed-in accounts (the account chooser of prompt=select_account).
CREATE TABLE oidc_sessions (
  sid_hash TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  sid TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;

CREATE TABLE oidc_session_accounts (
  sid_hash TEXT NOT NULL REFERENCES oidc_sessions (sid_hash) ON DELETE CASCADE,
  user_id TEXT NOT NULL,
  auth_time INTEGER NOT NULL,
  amr TEXT NOT NULL,
  PRIMARY KEY (sid_hash, user_id)
) STRICT;

-- A pending authorization request while the user signs in or consents.
CREATE TABLE oidc_interactions (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  browser_hash TEXT NOT NULL,
  params TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;

CREATE TABLE oidc_consents (
  tenant_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  granted_at TEXT NOT NULL,
  PRIMARY KEY (tenant_id, user_id, client_id)
) STRICT;

-- Per-tenant switches (plain PKCE allowed, ...), JSON.
CREATE TABLE oidc_tenant_settings (
  tenant_id TEXT PRIMARY KEY,
  settings TEXT NOT NULL
) STRICT;

CREATE TABLE oidc_passkeys (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  public_key TEXT NOT NULL,
  counter INTEGER NOT NULL,
  transports TEXT NOT NULL,
  created_at TEXT NOT NULL
) STRICT;

-- One-time e-mail tokens (magic link, recovery, invitation claim), by SHA-256.
CREATE TABLE oidc_email_tokens (
  token_hash TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  purpose TEXT NOT NULL,
  interaction_id TEXT,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
) STRICT;
