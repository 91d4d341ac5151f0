-- The public origin a tenant signs and publishes its absolute URLs under (credential issuer,
-- status lists, OIDC issuer, federation statements, verifier metadata, mailed links).
-- NULL: the tenant's host name on the scheme and port the appliance listens on.
ALTER TABLE tenants ADD COLUMN public_origin TEXT;
