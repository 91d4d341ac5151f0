-- Backups (server/backup): the schedule (at most one: where, how often, how many to keep) and
-- one row per finished backup, so the dashboard, /readyz and `sovcomms doctor` read the last
-- success and the last failure from one place whichever process (server job, CLI) made it. The
-- key scheduled archives are encrypted with is a sealed setting (secret:backup-key), not here.
CREATE TABLE backup_schedule (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  every_ms    INTEGER NOT NULL CHECK (every_ms >= 60000),
  keep        INTEGER NOT NULL CHECK (keep >= 1),
  target      TEXT NOT NULL,
  created_at  INTEGER NOT NULL             -- ms since epoch
) STRICT;

CREATE TABLE backup_runs (
  id          INTEGER PRIMARY KEY,
  trigger     TEXT NOT NULL CHECK (trigger IN ('schedule', 'cli', 'api')),
  target      TEXT NOT NULL,
  started_at  INTEGER NOT NULL,            -- ms since epoch
  finished_at INTEGER NOT NULL,
  ok          INTEGER NOT NULL CHECK (ok IN (0, 1)),
  file        TEXT,                        -- the archive's name in target (ok only)
  bytes       INTEGER,
  error       TEXT                         -- why it failed (no secrets: paths and causes)
) STRICT;
CREATE INDEX backup_runs_finished ON backup_runs(ok, finished_at);
