-- Whether a tenant accepts the spec's admin signature (X-Service-Admin-Signature: no body digest,
-- no time). Tenants that exist keep it (their scripts use it); new tenants are added with it off
-- (the primary tenant made at first start has it on: the spec's interface out of the box).
ALTER TABLE tenants ADD COLUMN hmac_v1 INTEGER NOT NULL DEFAULT 1 CHECK (hmac_v1 IN (0, 1));
