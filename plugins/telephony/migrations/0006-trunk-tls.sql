-- SIP over TLS (RFC 3261 §26): transport 'tls' and the CA a trunk's server certificate must chain
-- to (PEM; '' = the system store). SQLite cannot widen a CHECK constraint in place, so the table
-- is rebuilt with every column it has after 0004 (0002's dns_srv, 0004's inbound_auth).
CREATE TABLE tel_trunks_new (
  tenant_id            TEXT NOT NULL,
  id                   TEXT NOT NULL,
  name                 TEXT NOT NULL,
  host                 TEXT NOT NULL,
  port                 INTEGER NOT NULL,
  transport            TEXT NOT NULL CHECK (transport IN ('udp', 'tcp', 'tls')),
  username             TEXT NOT NULL DEFAULT '',
  password_sealed      TEXT NOT NULL DEFAULT '',
  register             INTEGER NOT NULL DEFAULT 0,
  from_domain          TEXT NOT NULL DEFAULT '',
  caller_id            TEXT NOT NULL DEFAULT '',
  max_concurrent_calls INTEGER NOT NULL DEFAULT 10,
  codecs               TEXT NOT NULL DEFAULT '["PCMU","PCMA"]',
  created_at           TEXT NOT NULL,
  updated_at           TEXT NOT NULL,
  dns_srv              INTEGER NOT NULL DEFAULT 0,
  inbound_auth         TEXT NOT NULL DEFAULT 'address' CHECK (inbound_auth IN ('address', 'digest')),
  tls_ca_pem           TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (tenant_id, id)
) STRICT;

INSERT INTO tel_trunks_new (tenant_id, id, name, host, port, transport, username, password_sealed, register, from_domain,
  caller_id, max_concurrent_calls, codecs, created_at, updated_at, dns_srv, inbound_auth)
SELECT tenant_id, id, name, host, port, transport, username, password_sealed, register, from_domain,
  caller_id, max_concurrent_calls, codecs, created_at, updated_at, dns_srv, inbound_auth
FROM tel_trunks;

DROP TABLE tel_trunks;
ALTER TABLE tel_trunks_new RENAME TO tel_trunks;
