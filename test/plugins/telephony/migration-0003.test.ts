import { describe, expect, it } from 'vitest';
import { CORE_MIGRATIONS } from '../../../server/app.ts';
import { openStore } from '../../../server/store/db.ts';
import { appliedVersion, migrate } from '../../../server/store/migrate.ts';
import { TenantService } from '../../../server/tenancy.ts';
import { EventBus } from '../../../server/events.ts';
import { ManualClock } from '../../../server/clock.ts';
import { createLogger } from '../../../server/log.ts';
import { makePaths } from '../../../server/plugin-host.ts';
import telephony from '../../../plugins/telephony/index.ts';
import { eventSchemas } from '../../../plugins/telephony/schemas.ts';
import { TelephonyRepo, type TranscriptRow } from '../../../plugins/telephony/repo.ts';
import { TranscriptStore } from '../../../plugins/telephony/transcripts/store.ts';
import { TranscriptShares } from '../../../plugins/telephony/transcripts/shares.ts';
import { scratchDirs } from '../../support/cleanup.ts';

const dir = scratchDirs('sovcomms-tel-0003-');

/**
 * Migration 0003 (transcript shares) on a database written by the previous version: the store is
 * built at telephony version 2 with the real runner, filled, then migrated; the old rows stay as
 * they were and the new table works with them (STYLE.md "Migrations are numbered, monotonic, tested").
 */
describe('telephony migration 0003-transcript-shares', () => {
  it('upgrades a version-2 store: rows kept, the shares table usable with an existing transcript', () => {
    const all = telephony.migrations!;
    expect(all.map((m) => m.name)).toContain('0003-transcript-shares');
    const d = dir();
    const db = openStore(d);
    try {
      migrate(db, 'core', CORE_MIGRATIONS);
      expect(
        migrate(
          db,
          'telephony',
          all.filter((m) => m.version <= 2),
        ).applied,
      ).toEqual(['0001-telephony', '0002-trunk-dns-srv']);
      expect(appliedVersion(db, 'telephony')).toBe(2);
      const tenant = new TenantService(db, d).add('office.example', 'Office', { primary: true });

      // What a version-2 appliance wrote.
      const now = '2026-01-01T00:00:00.000Z';
      db.prepare(
        `INSERT INTO tel_trunks (tenant_id, id, name, host, port, transport, dns_srv, created_at, updated_at)
                  VALUES (?, 'main', 'Main', 'sip.example', 5060, 'udp', 1, ?, ?)`,
      ).run(tenant.id, now, now);
      const transcript: TranscriptRow = {
        tenant_id: tenant.id,
        call_id: 'oac-0123456789ab',
        caller_source: 'outbound-ai',
        started_utc: now,
        ended_utc: now,
        mtime_utc: now,
        duration_sec: 42,
        rule: '',
        phone: '+4930123456',
        display_name: 'Dr. Example',
        number: '',
        outcome: 'finished',
        voice: 'Aoede',
        language: 'en-US',
        model: 'm',
        tokens_total: 1,
        tokens_prompt: 1,
        turn_count: 2,
        size: 100,
        file: 'oac-0123456789ab.json',
      };
      new TelephonyRepo(db).upsertTranscript(transcript);
      const before = JSON.stringify([db.prepare('SELECT * FROM tel_trunks').all(), db.prepare('SELECT * FROM tel_transcripts').all()]);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'tel_transcript_shares'").get()).toBeUndefined();

      const upTo3 = all.filter((m) => m.version <= 3);
      expect(migrate(db, 'telephony', upTo3).applied).toEqual(['0003-transcript-shares']);
      expect(appliedVersion(db, 'telephony')).toBe(3);
      expect(JSON.stringify([db.prepare('SELECT * FROM tel_trunks').all(), db.prepare('SELECT * FROM tel_transcripts').all()])).toBe(before);
      // A second start applies nothing.
      expect(migrate(db, 'telephony', upTo3).applied).toEqual([]);

      // The new table, through the real service, on the transcript that was there before.
      const clock = new ManualClock(Date.parse(now));
      const events = new EventBus(db, clock, createLogger({ level: 'silent' }));
      for (const [name, schema] of Object.entries(eventSchemas)) events.declare('telephony', name, schema);
      const repo = new TelephonyRepo(db);
      const shares = new TranscriptShares(repo, new TranscriptStore(repo, makePaths(d)), events, clock);
      const { share, token } = shares.create(tenant, transcript.call_id, 0, 'admin');
      expect(share).toMatchObject({ callId: transcript.call_id, file: transcript.file, ttlHours: 0, expiresUtc: null, status: 'active' });
      expect(shares.list(tenant, transcript.call_id, 50, 0)).toMatchObject({ total: 1, data: [{ id: share.id, tokenTail: token.slice(-8) }] });
      expect((db.prepare('SELECT name FROM events').all() as { name: string }[]).map((e) => e.name)).toEqual(['transcript.share.created']);
      // Re-saving the transcript (INSERT OR REPLACE) must not take its links with it.
      repo.upsertTranscript({ ...transcript, size: 200 });
      expect(shares.list(tenant, transcript.call_id, 50, 0).total).toBe(1);

      // The table's own guards.
      const insert = db.prepare(`INSERT INTO tel_transcript_shares (id, tenant_id, call_id, token_hash, token_tail, ttl_hours, created_at, created_by)
                                 VALUES (?, ?, ?, ?, 'abcdefgh', ?, ?, 'x')`);
      const hash = (db.prepare('SELECT token_hash FROM tel_transcript_shares').get() as { token_hash: string }).token_hash;
      expect(() => insert.run('shr_dup', tenant.id, transcript.call_id, hash, 1, now)).toThrow(/UNIQUE/);
      expect(() => insert.run('shr_neg', tenant.id, transcript.call_id, 'f'.repeat(64), -1, now)).toThrow(/CHECK/);
    } finally {
      db.close();
    }
  });
});
