-- Trunks whose SIP server is located through DNS SRV records (RFC 3263 §4.2) instead of host:port.
ALTER TABLE tel_trunks ADD COLUMN dns_srv INTEGER NOT NULL DEFAULT 0;
