-- Credentials issued with each access token: a leaked token mints at most credentialsPerToken.
ALTER TABLE wi_token ADD COLUMN issued INTEGER NOT NULL DEFAULT 0;
