-- SRTP keyed by SDES (RFC 4568) per trunk and per desk-phone login: required | optional | off
-- (bridge/media/sdp.ts); every existing one stays off, as its calls were.
ALTER TABLE tel_trunks ADD COLUMN srtp TEXT NOT NULL DEFAULT 'off' CHECK (srtp IN ('required', 'optional', 'off'));
ALTER TABLE tel_phones ADD COLUMN srtp TEXT NOT NULL DEFAULT 'off' CHECK (srtp IN ('required', 'optional', 'off'));
-- G.722 (wideband) is offered first where the trunk kept the old default codec list (no admin
-- chose it): offering one more codec is harmless (RFC 3264 §6.1), the trunk answers with what it has.
UPDATE tel_trunks SET codecs = '["G722","PCMU","PCMA"]' WHERE codecs = '["PCMU","PCMA"]';
