-- Trusted lists (ETSI TS 119 612) and the trust anchors read from them. Appliance-wide on
-- purpose: the EU lists are public, identical for every tenant, and 23 MB per copy, so there
-- is no tenant_id here (see plugins/lotl/README.md "Why appliance-wide").

-- The last accepted (signature-verified) version of each list; 'EU' is the LOTL.
CREATE TABLE lotl_lists (
  territory      TEXT PRIMARY KEY,
  is_lotl        INTEGER NOT NULL,
  sequence       INTEGER NOT NULL,
  version        INTEGER NOT NULL,
  issued         TEXT NOT NULL,            -- ListIssueDateTime, ISO 8601 UTC
  next_update    TEXT,                     -- NULL: a closed list
  signature_alg  TEXT NOT NULL,
  signer_sha256  TEXT NOT NULL,
  signing_time   TEXT,
  operator       TEXT NOT NULL DEFAULT '',
  source         TEXT NOT NULL,            -- 'import:<file name>' or 'upstream:<url>'
  doc_sha256     TEXT NOT NULL,
  tsp_count      INTEGER NOT NULL,
  service_count  INTEGER NOT NULL,
  accepted_at    TEXT NOT NULL
) STRICT;

-- The outcome of the last attempt at each list (accepted or why not), for ?status.
CREATE TABLE lotl_results (
  territory      TEXT PRIMARY KEY,
  at             TEXT NOT NULL,
  outcome        TEXT NOT NULL,            -- accepted | unchanged | rejected | failed
  reason         TEXT,                     -- stable code when not accepted
  detail         TEXT,
  signature      TEXT NOT NULL,            -- valid | untrusted_signer | invalid | not_checked
  source         TEXT NOT NULL,
  -- As the document claims it; verified only when outcome is accepted/unchanged.
  sequence       INTEGER,
  issued         TEXT,
  next_update    TEXT
) STRICT;

-- Pointers of the last accepted LOTL: where each national list lives and who may sign it.
CREATE TABLE lotl_pointers (
  id            INTEGER PRIMARY KEY,
  territory     TEXT NOT NULL,
  location      TEXT NOT NULL,
  mime_type     TEXT NOT NULL,
  tsl_type      TEXT NOT NULL,
  signers       TEXT NOT NULL              -- JSON array of base64 DER certificates
) STRICT;
CREATE INDEX lotl_pointers_territory ON lotl_pointers(territory);

-- One row per (certificate, service): the same certificate can serve several services.
CREATE TABLE lotl_anchors (
  id            INTEGER PRIMARY KEY,
  territory     TEXT NOT NULL REFERENCES lotl_lists(territory) ON DELETE CASCADE,
  sha256        TEXT NOT NULL,             -- hex SHA-256 of the DER
  tsp_name      TEXT NOT NULL,
  service_name  TEXT NOT NULL,
  service_type  TEXT NOT NULL,
  status        TEXT NOT NULL,
  status_since  TEXT NOT NULL,
  der           BLOB NOT NULL
) STRICT;
CREATE INDEX lotl_anchors_sha256 ON lotl_anchors(sha256);
CREATE INDEX lotl_anchors_territory ON lotl_anchors(territory);

-- Small key/value state: last run, next scheduled refresh.
CREATE TABLE lotl_state (
  key    TEXT PRIMARY KEY,
  value  TEXT NOT NULL
) STRICT;
