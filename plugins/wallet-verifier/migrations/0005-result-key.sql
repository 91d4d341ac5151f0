-- vp-result gives the disclosed claims only to whoever started the session. The session id is in
-- the QR code and the deep link (anyone who sees the screen has it); the result key is returned
-- by vp-start alone and kept here as its SHA-256. Sessions of before have none: their results
-- answer status only.
ALTER TABLE vp_session ADD COLUMN result_key_hash TEXT;
