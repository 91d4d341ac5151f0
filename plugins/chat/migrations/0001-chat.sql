-- Chat threads: direct (two users, or one: notes to self) and groups. A direct thread is found by
-- its key, the two user ids sorted and joined by '|', so a pair has exactly one thread.
CREATE TABLE chat_threads (
  id          TEXT PRIMARY KEY,               -- d_<hex> direct, g_<hex> group (the spec's groupId)
  tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  kind        TEXT NOT NULL CHECK (kind IN ('direct', 'group')),
  name        TEXT,                           -- groups only
  direct_key  TEXT,                           -- direct only
  created_by  TEXT NOT NULL,                  -- user id
  created_at  INTEGER NOT NULL                -- ms since epoch
) STRICT;
CREATE UNIQUE INDEX chat_threads_direct ON chat_threads(tenant_id, direct_key) WHERE direct_key IS NOT NULL;

CREATE TABLE chat_members (
  tenant_id    TEXT NOT NULL,
  thread_id    TEXT NOT NULL REFERENCES chat_threads(id) ON DELETE CASCADE,
  user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  role         TEXT NOT NULL CHECK (role IN ('owner', 'member')),
  joined_at    INTEGER NOT NULL,
  read_up_to   INTEGER NOT NULL DEFAULT 0,    -- read marker: the highest message id read
  PRIMARY KEY (thread_id, user_id)
) STRICT;
CREATE INDEX chat_members_user ON chat_members(tenant_id, user_id);

-- The change log every socket delivers and resumes from. seq is the cursor; a message's id is the
-- seq of the event that created it, so "resume after the last message id" and "after the last
-- seq" are the same request. Message events carry no text: frames read the message as it is now,
-- so an edit, a delete or the retention job leaves no old text in the log.
CREATE TABLE chat_events (
  seq           INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id     TEXT NOT NULL,
  thread_id     TEXT NOT NULL,
  kind          TEXT NOT NULL,                -- message, message.edit, message.delete, thread, member.add, member.remove, read
  message_id    INTEGER,
  only_user_id  TEXT,                         -- set: delivered to this user only (read markers, a removal notice)
  data          TEXT,                         -- JSON for non-message kinds
  created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX chat_events_thread ON chat_events(tenant_id, thread_id, seq);
CREATE INDEX chat_events_user ON chat_events(tenant_id, only_user_id, seq) WHERE only_user_id IS NOT NULL;

CREATE TABLE chat_messages (
  id          INTEGER PRIMARY KEY,            -- = chat_events.seq of its 'message' event
  tenant_id   TEXT NOT NULL,
  thread_id   TEXT NOT NULL REFERENCES chat_threads(id) ON DELETE CASCADE,
  sender_id   TEXT NOT NULL,
  text        TEXT,                           -- plain text, never HTML; NULL once deleted
  file_sha    TEXT,                           -- a shared file (chat_files)
  file_name   TEXT,                           -- display name as sent, sanitised
  created_at  INTEGER NOT NULL,
  edited_at   INTEGER,
  deleted_at  INTEGER
) STRICT;
CREATE INDEX chat_messages_thread ON chat_messages(tenant_id, thread_id, id);
CREATE INDEX chat_messages_file ON chat_messages(tenant_id, file_sha) WHERE file_sha IS NOT NULL;
CREATE INDEX chat_messages_age ON chat_messages(tenant_id, created_at);

-- Content-addressed uploads: data/tenants/<tenant>/chat/files/<sha[0:2]>/<sha>. The row commits
-- before the bytes are renamed into place; `staged` names the complete temporary file until then,
-- so a restart finishes the rename (or drops the row): no row ever points at a partial file.
CREATE TABLE chat_files (
  tenant_id   TEXT NOT NULL,
  sha         TEXT NOT NULL,                  -- hex SHA-256 of the bytes
  size        INTEGER NOT NULL,
  type        TEXT NOT NULL,                  -- sniffed from the bytes (file-type), else application/octet-stream
  created_at  INTEGER NOT NULL,
  staged      TEXT,                           -- temp file name while the rename is pending
  PRIMARY KEY (tenant_id, sha)
) STRICT;

CREATE TABLE chat_settings (
  tenant_id       TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
  retention_days  INTEGER,                    -- NULL: keep forever
  updated_at      INTEGER NOT NULL,
  updated_by      TEXT NOT NULL
) STRICT;
