-- Wallet sign-in on /login.html and the `completed` result status. A session the login page
-- started carries the SHA-256 of a secret only that page holds and the pending authorization it
-- continues; after a verified presentation, the account the PID maps to (tenant policy). The
-- session is `completed` (completed_at) once that browser is signed in, or once its
-- sso_assertion is redeemed at the token endpoint.
ALTER TABLE vp_session ADD COLUMN login_secret_hash TEXT;
ALTER TABLE vp_session ADD COLUMN login_interaction TEXT;
ALTER TABLE vp_session ADD COLUMN login_user_id TEXT;
ALTER TABLE vp_session ADD COLUMN completed_at TEXT;
