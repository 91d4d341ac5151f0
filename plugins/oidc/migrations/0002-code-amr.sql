-- Authentication methods (RFC 8176 amr) travel with the code into the id_token of the token response.
ALTER TABLE oidc_codes ADD COLUMN amr TEXT;
