-- Whoever sees a QR code holds the session id, so a response that fails a check no longer
-- finishes its session: it is counted (refused_responses, the last check's name), and only
-- `maxRefusedResponses` of them end it. A login-page session binds the presentation to the
-- browser that started it (OpenID4VP 1.0 §13.3): the SHA-256 of a SameSite=Strict cookie set at
-- start, of the response_code the wallet is redirected with, and when that page was shown the
-- disclosed name to confirm (the cross-device way).
ALTER TABLE vp_session ADD COLUMN refused_responses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vp_session ADD COLUMN last_refused_check TEXT;
ALTER TABLE vp_session ADD COLUMN login_browser_hash TEXT;
ALTER TABLE vp_session ADD COLUMN login_code_hash TEXT;
ALTER TABLE vp_session ADD COLUMN login_reviewed_at TEXT;
