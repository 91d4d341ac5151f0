import { describe, expect, it } from 'vitest';
import telephony from '../../../plugins/telephony/index.ts';
import { Prompts } from '../../../plugins/telephony/prompts/prompts.ts';
import { storeAt } from '../../support/migrations.ts';

describe('telephony migration 0008-prompts-voicemail', () => {
  it('a version-5 call keeps its row and hangs up at a voicemail box (no message); prompts can be kept and resolved', () => {
    const { db, tenant, upgrade } = storeAt(telephony, 5);
    const now = '2026-01-01T00:00:00.000Z';
    db.prepare(
      `INSERT INTO tel_calls (call_id, tenant_id, phone, system_prompt, model, voice, language, max_seconds, status, created_at)
       VALUES ('oac-0123456789ab', ?, '+4930123456', 'Remind.', 'm', 'Aoede', 'en-US', 300, 'scheduled', ?)`,
    ).run(tenant.id, now);
    // Later branches' steps (0006, 0007) may run first; this one is the last.
    expect(upgrade().at(-1)).toBe('0008-prompts-voicemail');
    expect(db.prepare('SELECT system_prompt, voicemail_message FROM tel_calls').get()).toEqual({ system_prompt: 'Remind.', voicemail_message: null });
    const prompts = new Prompts(db, () => now, 500);
    prompts.save(tenant, 'reminder', 'You remind the callee.', 'test', false);
    expect(prompts.resolve(tenant, 'reminder')).toBe('You remind the callee.');
    // One slug per tenant.
    expect(() =>
      db.prepare(`INSERT INTO tel_prompts (tenant_id, slug, text, created_at, updated_at) VALUES (?, 'reminder', 'x', ?, ?)`).run(tenant.id, now, now),
    ).toThrow(/UNIQUE|PRIMARY/);
    db.close();
  });
});
