-- Revoked entries per list: the status list token is rebuilt when their count changes (a
-- revocation from the CLI, another process, is seen at once), and counting them stays cheap.
CREATE INDEX wi_credential_revoked ON wi_credential (tenant_id, list_id) WHERE revoked_at IS NOT NULL;
