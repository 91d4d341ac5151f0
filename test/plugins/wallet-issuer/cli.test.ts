import fs from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../../server/cli.ts';
import { readDataDirDb, runCli } from '../../support/cli.ts';
import { tempDir } from '../../support/server.ts';
import { CLAIMS } from './support.ts';

/**
 * `sovcomms issuer offer create --user NAME`: the CLI binds an authorization code offer to one
 * account as create-offer's `user` does, with the same refusals (an account that is not active in
 * that tenant; a pre-authorized offer) and the same `vci-offer-create` audit entry. Most runs go
 * through the bin's `main()` in this process (fast); one through the real bin in a child process.
 */
let dataDir: string;
let claimsFile: string;

async function cli(argv: string[], stdin = ''): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => stdin };
  const code = await main([...argv, '--data-dir', dataDir], io);
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

const readDb = <T>(fn: (db: Database.Database) => T): T => readDataDirDb(dataDir, fn);

const offers = () =>
  readDb((db) => db.prepare('SELECT id, subject_user, pre_auth_hash, issuer_state_hash FROM wi_offer ORDER BY created_at, id').all()) as {
    id: string;
    subject_user: string | null;
    pre_auth_hash: string | null;
    issuer_state_hash: string | null;
  }[];

beforeAll(async () => {
  dataDir = tempDir('sovcomms-issuer-cli-');
  claimsFile = path.join(dataDir, 'claims.json');
  fs.writeFileSync(claimsFile, JSON.stringify(CLAIMS));
  for (const argv of [
    ['user', 'add', 'bob', '--password-stdin'],
    ['tenant', 'add', 'office-b.example', '--name', 'Office B'],
    ['user', 'add', 'carol', '--tenant', 'office-b.example', '--password-stdin'],
  ]) {
    const r = await cli(argv, 'a long enough password 1\n');
    expect(r.code, r.stderr).toBe(0);
  }
}, 120_000);
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

describe('sovcomms issuer offer create --user', { timeout: 120_000 }, () => {
  it('binds an authorization code offer to the account and audits it like the API (real bin, child process)', async () => {
    const r = await runCli(['issuer', 'offer', 'create', '--claims-file', claimsFile, '--user', 'bob'], { dataDir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^openid-credential-offer:\/\//);
    expect(r.stdout).toMatch(/for user: bob/);
    const id = /offer: {4}(off_\S+)/.exec(r.stdout)![1]!;
    const row = offers().find((o) => o.id === id)!;
    // An authorization code offer (issuer_state, no pre-authorized code) for bob alone.
    expect(row).toMatchObject({ subject_user: 'bob', pre_auth_hash: null });
    expect(row.issuer_state_hash).toMatch(/^[0-9a-f]{64}$/);
    const audit = readDb((db) => db.prepare("SELECT user, extra FROM audit_log WHERE event = 'vci-offer-create'").all()) as { user: string; extra: string }[];
    expect(audit).toHaveLength(1);
    expect(audit[0]!.user).toMatch(/^cli:/);
    expect(audit[0]!.extra).toContain(`offer=${id}`);
    expect(audit[0]!.extra).toContain('for_user=bob');
    expect(audit[0]!.extra).toContain('pre_authorized=false');
  });

  it('refuses an account that is unknown or of another tenant: non-zero exit, no offer', async () => {
    const before = offers().length;
    for (const name of ['nobody', 'carol']) {
      const r = await cli(['issuer', 'offer', 'create', '--claims-file', claimsFile, '--user', name]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`no active account ${name} in this tenant`);
    }
    // carol is an account of office-b.example: there the same command works.
    const b = await cli(['issuer', 'offer', 'create', '--claims-file', claimsFile, '--user', 'carol', '--tenant', 'office-b.example']);
    expect(b.code, b.stderr).toBe(0);
    expect(offers()).toHaveLength(before + 1);
    expect(offers().at(-1)!.subject_user).toBe('carol');
  });

  it('refuses --user with --pre-authorized (as create-offer refuses user with pre_authorized: true)', async () => {
    const before = offers().length;
    const r = await cli(['issuer', 'offer', 'create', '--claims-file', claimsFile, '--user', 'bob', '--pre-authorized']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--user binds an authorization code offer/);
    expect(offers()).toHaveLength(before);
    // Without --user a pre-authorized offer is bound to nobody.
    const plain = await cli(['issuer', 'offer', 'create', '--claims-file', claimsFile, '--pre-authorized']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(offers().at(-1)).toMatchObject({ subject_user: null, issuer_state_hash: null });
  });

  it('lists --user in the usage', async () => {
    const r = await cli(['help']);
    expect(r.stdout + r.stderr).toContain('issuer offer create --claims-file F [--format dc+sd-jwt|mso_mdoc] [--pre-authorized [--tx-code] | --user NAME]');
  });
});
