-- Prompts kept per tenant (README "Prompts"): a call's systemPrompt that names a slug is the
-- prompt's text, resolved when the call is created.
CREATE TABLE tel_prompts (
  tenant_id   TEXT NOT NULL,
  slug        TEXT NOT NULL,
  text        TEXT NOT NULL,
  created_by  TEXT NOT NULL DEFAULT '',
  created_at  TEXT NOT NULL,
  updated_at  TEXT NOT NULL,
  PRIMARY KEY (tenant_id, slug)
);

-- A call's voicemail policy (README "POST /calls"): NULL hangs up at a voicemail box (the
-- default), else the message the AI leaves there before it hangs up.
ALTER TABLE tel_calls ADD COLUMN voicemail_message TEXT;
