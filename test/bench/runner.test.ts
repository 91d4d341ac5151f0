import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fmt, targetMet, validateResults } from '../../bench/lib/contract.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');

describe('bench contract', () => {
  it('judges targets on value, or on ratio when written as ratio or with x', () => {
    expect(targetMet({ name: 'a', value: 120, unit: 'MB', target: '< 150 MB' })).toBe(true);
    expect(targetMet({ name: 'a', value: 1.6, unit: 's', target: '< 1.5 s' })).toBe(false);
    expect(targetMet({ name: 'a', value: 10, unit: 'req/s', ratio: 0.69, target: '>= 0.7x' })).toBe(false);
    expect(targetMet({ name: 'a', value: 10, unit: 'req/s', ratio: 0.7, target: 'ratio >= 0.7' })).toBe(true);
    expect(targetMet({ name: 'a', value: 10, unit: 'req/s', target: 'fast enough' })).toBeUndefined();
    expect(targetMet({ name: 'a', value: 10, unit: 'req/s' })).toBeUndefined();
  });

  it('refuses rows that break the contract, naming the row', () => {
    expect(() => validateResults({})).toThrow(/array/);
    expect(() => validateResults([{ name: 'x', value: Number.NaN, unit: 'ms' }])).toThrow(/result 0 \(x\): value/);
    expect(() => validateResults([{ name: 'x', value: 1, unit: 'ms', ratio: 'high' }])).toThrow(/ratio/);
    expect(validateResults([{ name: 'x', value: 1, unit: 'ms', note: 'n' }])).toHaveLength(1);
  });

  it('formats numbers for people', () => {
    expect(fmt(12345.6)).toBe('12,346');
    expect(fmt(0.12345)).toBe('0.123');
    expect(fmt(undefined)).toBe('');
  });
});

describe('bench runner', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-runner-'));
    fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
    fs.writeFileSync(
      path.join(dir, 'good.bench.ts'),
      `export default async function run() {
      return [{ name: 'speed', value: 1500, unit: 'req/s', peer: 'bare', peerValue: 2000, ratio: 0.75, target: '>= 0.7x', note: 'fixture' },
              { name: 'memory', value: 160, unit: 'MB', target: '< 150 MB' }];
    }`,
    );
    fs.writeFileSync(path.join(dir, 'throws.bench.ts'), `export default async function run() { throw new Error('fixture broke'); }`);
    fs.writeFileSync(path.join(dir, 'hangs.bench.ts'), `export default async function run() { setInterval(() => {}, 1000); return new Promise(() => {}); }`);
    fs.writeFileSync(path.join(dir, 'invalid.bench.ts'), `export default async function run() { return [{ name: 'x', value: 'fast', unit: '' }]; }`);
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('runs every benchmark, reports failures, exits 0 and writes the results', async () => {
    const { stdout } = await run(process.execPath, ['bin/run-ts.mjs', 'bench/run.ts', '--dir', dir, '--timeout', '4'], { cwd: ROOT, timeout: 60_000 });
    expect(stdout).toMatch(/good\s+speed\s+1,500\s+req\/s\s+bare\s+2,000\s+0\.75\s+>= 0\.7x\s+yes/);
    expect(stdout).toMatch(/good\s+memory\s+160\s+MB.*< 150 MB\s+NO/);
    expect(stdout).toMatch(/throws\s+FAILED: fixture broke/);
    expect(stdout).toMatch(/hangs\s+FAILED: timed out after 4 s/);
    expect(stdout).toMatch(/invalid\s+FAILED: result 0 \(x\): value must be a finite number/);
    const files = fs.readdirSync(path.join(dir, 'results'));
    const json = files.find((f) => f.endsWith('.json'))!;
    expect(files).toContain(json.replace(/\.json$/, '.md'));
    const data = JSON.parse(fs.readFileSync(path.join(dir, 'results', json), 'utf8'));
    expect(Object.keys(data.benches).sort()).toEqual(['good', 'hangs', 'invalid', 'throws']);
    expect(data.machine.cores).toBeGreaterThan(0);
    expect(fs.readFileSync(path.join(dir, 'results', json.replace(/\.json$/, '.md')), 'utf8')).toContain(
      '| good | speed | 1,500 | req/s | bare | 2,000 | 0.75 | >= 0.7x | yes |',
    );

    // A second run of one benchmark replaces only its own entry in the day's file.
    await run(process.execPath, ['bin/run-ts.mjs', 'bench/run.ts', 'good', '--dir', dir], { cwd: ROOT, timeout: 60_000 });
    const again = JSON.parse(fs.readFileSync(path.join(dir, 'results', json), 'utf8'));
    expect(Object.keys(again.benches).sort()).toEqual(['good', 'hangs', 'invalid', 'throws']);
    expect(again.benches.good.startedAt).not.toBe(data.benches.good.startedAt);
  }, 90_000);

  it('exits 1 for an unknown benchmark name and 2 for a bad option', async () => {
    await expect(run(process.execPath, ['bin/run-ts.mjs', 'bench/run.ts', 'nope', '--dir', dir], { cwd: ROOT })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('no benchmark named nope'),
    });
    await expect(run(process.execPath, ['bin/run-ts.mjs', 'bench/run.ts', '--timeout', 'soon', '--dir', dir], { cwd: ROOT })).rejects.toMatchObject({
      code: 2,
    });
  }, 60_000);
});
