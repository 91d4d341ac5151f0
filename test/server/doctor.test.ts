import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../server/cli.ts';
import { doctorHooks } from '../../server/cli/doctor.ts';
import { tempDir } from '../support/server.ts';

/** `sovcomms doctor` reports schema versions, pending migrations, the runtime, disk, TLS, backup state and the SIP address. */
const dataDir = tempDir();
afterAll(() => {
  delete doctorHooks.backupState;
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function doctor(): Promise<string[]> {
  const out: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: () => {}, stdin: async () => '' };
  await main(['doctor', '--data-dir', dataDir], io);
  return out;
}

describe('sovcomms doctor', () => {
  it('names each schema version, the runtime, disk space, TLS, backup and SIP', async () => {
    const out = await doctor();
    expect(out).toContain('ok    schema core at version 3, none pending');
    expect(out.some((l) => /^ok {4}schema telephony at version \d+, none pending$/.test(l))).toBe(true);
    expect(out.some((l) => l.startsWith(`ok    runtime Node ${process.versions.node}`))).toBe(true);
    expect(out.some((l) => /disk: [\d.]+ GiB free of [\d.]+ GiB under /.test(l))).toBe(true);
    expect(out).toContain('ok    no TLS configured (plain HTTP)');
    expect(out).toContain('warn  backup: none configured');
    expect(out.some((l) => /SIP (listens on|address) 127\.0\.0\.1:5060/.test(l))).toBe(true);
  });

  it('reads the backup state through the hook the backup feature sets', async () => {
    doctorHooks.backupState = () => ({ ok: false, summary: 'last scheduled backup failed 2 h ago' });
    expect(await doctor()).toContain('FAIL  backup: last scheduled backup failed 2 h ago');
  });
});
