import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTar, TarError } from '../../../plugins/lotl/tar.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { tar } from './support.ts';

/**
 * Gzip bombs at the air-gapped import. The archive is inflated as a stream and read as it arrives,
 * so a bomb is refused once its output passes the cap (or at the header of a list past
 * maxListBytes), with memory bounded by the cap and the event loop turning all the while.
 */

const MiB = 1024 * 1024;

/** One ustar header for a file of `size` bytes (its data is not included). */
function header(name: string, size: number): Buffer {
  const h = tar([{ name, bytes: Buffer.alloc(0) }]).subarray(0, 512);
  h.write(size.toString(8).padStart(11, '0') + '\0', 124);
  h.write('        ', 148);
  const sum = h.reduce((s, b) => s + b, 0);
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
  return h;
}

/**
 * A ~2 MB gzip file that inflates to 2 GiB: 128 files of 16 MiB of zeros (each under the default
 * maxListBytes of 32 MiB), written as concatenated gzip members (RFC 1952 §2.2) so that the
 * 16 MiB member is compressed once and repeated.
 */
function bomb(): Buffer {
  const zeros = zlib.gzipSync(Buffer.alloc(16 * MiB), { level: 9 });
  const parts: Buffer[] = [];
  for (let i = 0; i < 128; i++) parts.push(zlib.gzipSync(header(`bomb/list-${i}.xml`, 16 * MiB)), zeros);
  return Buffer.concat(parts);
}

describe('readTar', () => {
  it('reads the same files from a plain tar and from its gzip, whatever the chunk boundaries (long names, pax paths, files over 64 KiB)', async () => {
    const files = [
      { name: 'a.xml', bytes: crypto.randomBytes(150_000) },
      { name: 'b.txt', bytes: crypto.randomBytes(70_000) },
      { name: 'c.xml', bytes: Buffer.from('<x/>') },
      { name: 'empty.xml', bytes: Buffer.alloc(0) },
    ];
    const plain = tar(files);
    for (const input of [plain, zlib.gzipSync(plain)]) {
      const got = await readTar(input, { maxFiles: 10, maxBytes: 10 * MiB });
      expect(got.map((e) => e.name)).toEqual(files.map((f) => f.name));
      got.forEach((e, i) => expect(e.bytes.equals(files[i]!.bytes), e.name).toBe(true));
      const kept = await readTar(input, { maxFiles: 10, maxBytes: 10 * MiB, keep: (n) => n.endsWith('.xml') });
      expect(kept.map((e) => e.name)).toEqual(['a.xml', 'c.xml', 'empty.xml']);
    }
    await expect(readTar(zlib.gzipSync(plain.subarray(0, 100_000)), { maxFiles: 10, maxBytes: 10 * MiB })).rejects.toThrow(/truncated/);
    await expect(readTar(zlib.gzipSync(plain), { maxFiles: 2, maxBytes: 10 * MiB })).rejects.toThrow(/more than 2 files/);
    await expect(readTar(zlib.gzipSync(plain), { maxFiles: 10, maxBytes: 10 * MiB, maxEntryBytes: 100_000 })).rejects.toThrow(/a\.xml is larger/);
  });

  it('refuses a 2 MB bomb once 128 MiB have come out, without blocking the event loop', async () => {
    const b = bomb();
    expect(b.length).toBeLessThan(3 * MiB);
    const ticks: number[] = [];
    const timer = setInterval(() => ticks.push(performance.now()), 5);
    const t0 = performance.now();
    const err = await readTar(b, { maxFiles: 500, maxBytes: 128 * MiB, maxEntryBytes: 32 * MiB }).catch((e: unknown) => e);
    const took = performance.now() - t0;
    clearInterval(timer);
    const gaps = ticks.slice(1).map((t, i) => t - ticks[i]!);
    console.log(`bomb read in ${took.toFixed(0)} ms, ${ticks.length} ticks, largest gap ${Math.max(0, ...gaps).toFixed(0)} ms`);
    // gunzipSync was one gap as long as the whole inflation; streamed, the timer keeps firing.
    expect(ticks.length).toBeGreaterThan(3);
    expect(Math.max(...gaps)).toBeLessThan(Math.max(took / 3, 50));
    expect(err).toBeInstanceOf(TarError);
    expect((err as Error).message).toMatch(/unpacks to more than 128 MiB/);
  });
});

describe('POST /lotl.ashx?import with a gzip bomb', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.stop();
  });

  const post = (gz: Buffer) =>
    s.fetch('/lotl.ashx?import', {
      method: 'POST',
      body: gz,
      headers: { 'Content-Type': 'application/gzip', 'X-Service-Admin-Signature': s.hmac('lotl-import', undefined, gz.length) },
    });

  const healthz = async (): Promise<number> => {
    const h0 = performance.now();
    await (await s.fetch('/healthz', { key: null })).text();
    return performance.now() - h0;
  };

  it('answers 400 early with bounded memory while /healthz keeps answering', async () => {
    const b = bomb();
    const baseline: number[] = [];
    for (let i = 0; i < 20; i++) baseline.push(await healthz());
    global.gc?.();
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    const health: number[] = [];
    let done = false;
    const t0 = performance.now();
    const answer = post(b).finally(() => (done = true));
    // Health probes one after another while the import runs.
    const probes = (async () => {
      while (!done) health.push(await healthz());
    })();
    const r = await answer;
    const took = performance.now() - t0;
    await probes;
    clearInterval(sampler);
    console.log(
      `gzip bomb: ${(b.length / MiB).toFixed(1)} MB refused in ${took.toFixed(0)} ms, RSS +${((peak - rss0) / MiB).toFixed(0)} MiB, ` +
        `${health.length} /healthz answers meanwhile, slowest ${Math.max(0, ...health).toFixed(0)} ms (before: ${Math.max(...baseline).toFixed(0)} ms)`,
    );
    expect(r.status).toBe(400);
    // gunzipSync with its 512 MiB cap took the process up by more than half a gigabyte; now the
    // kept files (at most the 128 MiB cap) and zlib's window are what the import holds.
    expect(peak - rss0).toBeLessThan(300 * MiB);
    expect(health.length).toBeGreaterThan(0);
    // As the slow-client suites bound it: 10 times the slowest answer before, at least 500 ms;
    // and on a machine so loaded that the whole import crawls, under half of it. An import that
    // blocked the event loop (gunzipSync) held one probe for all of its inflation, about its
    // whole time, so the bound still fails it there.
    expect(Math.max(...health)).toBeLessThan(Math.max(10 * Math.max(...baseline), 500, took / 2));
    const body = (await r.json()) as { error: string; error_description: string };
    expect(body.error).toBe('invalid_request');
    expect(body.error_description).toMatch(/unpacks to more than 128 MiB/);
  });

  it('a list whose header claims more than maxListBytes is refused at that header', async () => {
    const gz = Buffer.concat([zlib.gzipSync(header('big/huge.xml', 2 * 1024 * MiB)), zlib.gzipSync(Buffer.alloc(16 * MiB))]);
    const t0 = performance.now();
    const r = await post(gz);
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error_description: string }).error_description).toMatch(/huge\.xml is larger than 33554432 bytes/);
    console.log(`2 GiB list header refused in ${(performance.now() - t0).toFixed(0)} ms`);
  });
});
