import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readDataDirDb, runCli } from '../support/cli.ts';
import { scratchDirs } from '../support/cleanup.ts';

/**
 * Damaged, truncated and wrongly keyed archives are refused by `sovcomms backup restore` with a
 * clear reason (exit 1, no stack) and change nothing: neither an existing data dir (even with
 * `--yes`) nor a fresh one (not even created). An existing data dir is replaced only with
 * `--yes`, and kept beside. The archive is a real one of the CLI (`backup create`), of a data dir
 * with a file of a few chunks; each case works on its own copy of the existing data dir, so the
 * cases run side by side.
 */
const dir = scratchDirs('sovcomms-backup-refused-');
let archive: string;
let recoveryKey: string;
/** A data dir with a tenant of its own (keep.example): what a refused restore must leave alone. */
let existing: string;

beforeAll(async () => {
  const src = dir();
  existing = dir();
  const [made, added] = await Promise.all([
    (() => {
      // A file of three chunks: a cut at the last chunk boundary leaves whole chunks before it.
      fs.mkdirSync(path.join(src, 'tenants', 'fill'), { recursive: true });
      fs.writeFileSync(path.join(src, 'tenants', 'fill', 'blob.bin'), crypto.randomBytes(2_500_000));
      return runCli(['backup', 'create', '--to', path.join(src, 'out')], { dataDir: src });
    })(),
    runCli(['tenant', 'add', 'keep.example'], { dataDir: existing }),
  ]);
  expect(made.code, made.stderr).toBe(0);
  expect(added.code, added.stderr).toBe(0);
  recoveryKey = /[A-Z2-7]{4}(?:-[A-Z2-7]{1,4}){12}/.exec(made.stdout)![0];
  const out = path.join(src, 'out');
  archive = path.join(
    out,
    fs.readdirSync(out).find((n) => n.endsWith('.sovbak'))!,
  );
}, 120_000);

/** A copy of `archive` changed by `mutate`, in a scratch dir. */
function variant(mutate: (b: Buffer) => Buffer): string {
  const f = path.join(dir(), 'variant.sovbak');
  fs.writeFileSync(f, mutate(Buffer.from(fs.readFileSync(archive))));
  return f;
}

/** A copy of the existing data dir of its own, and the digest of its tree. */
function existingCopy(): { at: string; digest: string } {
  const at = path.join(dir(), 'existing');
  fs.cpSync(existing, at, { recursive: true });
  return { at, digest: treeDigest(at) };
}

function treeDigest(d: string): string {
  const h = crypto.createHash('sha256');
  const walk = (p: string) => {
    for (const n of fs.readdirSync(p).sort()) {
      const abs = path.join(p, n);
      if (fs.statSync(abs).isDirectory()) walk(abs);
      else h.update(abs).update(fs.readFileSync(abs));
    }
  };
  walk(d);
  return h.digest('hex');
}

/** The archive less its last chunk: every byte before it intact, so only the missing final flag tells. */
function cutAtLastChunk(b: Buffer): Buffer {
  let pos = 12 + b.readUInt32BE(8);
  let last = pos;
  let chunks = 0;
  while (pos < b.length) {
    last = pos;
    pos += 4 + (b.readUInt32BE(pos) & 0x7fffffff) + 16;
    chunks++;
  }
  expect(chunks).toBeGreaterThan(2);
  return b.subarray(0, last);
}

describe.concurrent('refused archives change nothing', { timeout: 240_000 }, () => {
  const cases: [string, () => string, string, RegExp][] = [
    ['a flipped byte in the middle', () => variant((b) => ((b[Math.floor(b.length / 2)]! ^= 0x01), b)), 'rk', /damaged or altered at chunk [1-9]\d*/],
    ['a truncated archive', () => variant((b) => b.subarray(0, b.length - 100)), 'rk', /truncated/],
    ['an archive cut at a chunk boundary', () => variant((b) => cutAtLastChunk(b)), 'rk', /truncated: it ends after chunk [1-9]\d* without its final chunk/],
    ['bytes appended', () => variant((b) => Buffer.concat([b, Buffer.from('extra')])), 'rk', /bytes after its final chunk/],
    [
      'a changed header (schema versions)',
      () =>
        variant((b) =>
          Buffer.from(
            b.toString('latin1').replace(/"core":(\d+)/, (_, v: string) => `"core":${Number(v) - 1}`),
            'latin1',
          ),
        ),
      'rk',
      /damaged or altered at chunk 0/,
    ],
    ['the wrong recovery key', () => archive, 'wrong', /wrong passphrase or recovery key/],
  ];
  for (const [what, file, secret, message] of cases) {
    it(`${what}: refused with a clear error, the existing data dir and a fresh one untouched`, async () => {
      const f = file();
      if (what.startsWith('a changed header')) expect(fs.readFileSync(f).equals(fs.readFileSync(archive))).toBe(false);
      const key = secret === 'rk' ? recoveryKey : 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA';
      const ex = existingCopy();
      const fresh = path.join(dir(), 'fresh');
      const [onExisting, onFresh] = await Promise.all([
        runCli(['backup', 'restore', f, '--recovery-key-stdin', '--yes'], { dataDir: ex.at, stdin: key, timeoutMs: 120_000 }),
        runCli(['backup', 'restore', f, '--recovery-key-stdin'], { dataDir: fresh, stdin: key, timeoutMs: 120_000 }),
      ]);
      expect(onExisting.code).toBe(1);
      expect(onExisting.stderr).toMatch(message);
      expect(onExisting.stderr).toContain('unchanged');
      expect(onExisting.stderr).not.toMatch(/\n\s+at /);
      expect(treeDigest(ex.at)).toBe(ex.digest);
      expect(fs.readdirSync(path.dirname(ex.at))).toEqual(['existing']);
      expect(onFresh.code).toBe(1);
      expect(onFresh.stderr).toMatch(message);
      expect(fs.existsSync(fresh)).toBe(false);
      expect(fs.readdirSync(path.dirname(fresh))).toEqual([]);
    });
  }

  it('an existing data dir is replaced only with --yes, and kept beside', async () => {
    const ex = existingCopy();
    const refused = await runCli(['backup', 'restore', archive, '--recovery-key-stdin'], { dataDir: ex.at, stdin: recoveryKey, timeoutMs: 120_000 });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--yes');
    expect(treeDigest(ex.at)).toBe(ex.digest);
    const ok = await runCli(['backup', 'restore', archive, '--recovery-key-stdin', '--yes'], { dataDir: ex.at, stdin: recoveryKey, timeoutMs: 120_000 });
    expect(ok.code, ok.stderr).toBe(0);
    const kept = /kept at (\S+)/.exec(ok.stdout)![1]!;
    expect(treeDigest(kept).length).toBe(64);
    readDataDirDb(kept, (db) => expect(db.prepare("SELECT COUNT(*) AS n FROM tenant_hosts WHERE host = 'keep.example'").get()).toEqual({ n: 1 }));
    readDataDirDb(ex.at, (db) => expect(db.prepare("SELECT COUNT(*) AS n FROM tenant_hosts WHERE host = 'keep.example'").get()).toEqual({ n: 0 }));
    expect(fs.readFileSync(path.join(ex.at, 'tenants', 'fill', 'blob.bin')).length).toBe(2_500_000);
  });
});
