-- The language of the mails sent to an account (sign-in links, password recovery, invitations):
-- NULL follows the request's language, as before this column existed.
ALTER TABLE users ADD COLUMN language TEXT CHECK (language IS NULL OR language IN ('en', 'de'));
