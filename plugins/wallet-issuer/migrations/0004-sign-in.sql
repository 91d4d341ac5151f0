-- The authorization code flow signs the person in through the tenant's own OpenID Provider.
-- An offer may name the one account that may redeem it; the code and the access token carry
-- the account that signed in (its e-mail goes into the credential).
ALTER TABLE wi_offer ADD COLUMN subject_user TEXT;
ALTER TABLE wi_code ADD COLUMN user_id TEXT;
ALTER TABLE wi_token ADD COLUMN user_id TEXT;

-- Sign-ins under way: the checked authorization request waits here while the browser is at the
-- OpenID Provider's pages. state is the OIDC `state`; browser_hash binds the sign-in to the
-- browser that started it (cookie), so a sign-in link handed to someone else is useless.
CREATE TABLE wi_login (
  tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  state_hash    TEXT NOT NULL PRIMARY KEY,
  browser_hash  TEXT NOT NULL,
  params        TEXT NOT NULL,                 -- JSON of the checked wallet authorization request
  sealed_verifier TEXT NOT NULL,               -- PKCE verifier towards the OpenID Provider, sealed
  nonce         TEXT NOT NULL,
  expires_at    INTEGER NOT NULL,
  used_at       INTEGER
) STRICT;
