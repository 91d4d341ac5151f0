import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { ManualClock } from '../../../server/clock.ts';
import { openStore, type DB } from '../../../server/store/db.ts';
import { migrate, sqlMigrations } from '../../../server/store/migrate.ts';
import { checkLotl, ListChecker } from '../../../plugins/lotl/check.ts';
import { LotlRepo } from '../../../plugins/lotl/repo.ts';
import { DEFAULT_SIGNERS, LotlService } from '../../../plugins/lotl/service.ts';
import { lotlConfig } from '../../../plugins/lotl/schemas.ts';
import { dersOfPem } from '../../../plugins/lotl/tsl.ts';
import { tempDir } from '../../support/server.ts';
import { fixtureText } from './support.ts';

/**
 * The LOTL is parsed and verified on the list-check thread like the national lists: the answer is
 * the inline one, and an import of a large LOTL leaves the event loop turning (a timer's lateness
 * stays bounded while the import runs).
 */
let dir: string;
let db: DB;
let svc: LotlService;
const checker = new ListChecker();
const lotl = fixtureText('eu-lotl.xml');

beforeAll(() => {
  dir = tempDir('lotl-thread-');
  db = openStore(path.join(dir, 'data'));
  migrate(db, 'lotl', sqlMigrations(new URL('../../../plugins/lotl/index.ts', import.meta.url).href));
  svc = new LotlService(new LotlRepo(db), lotlConfig.parse({}), new ManualClock(Date.parse('2026-08-22T00:00:00Z')), pino({ level: 'silent' }));
});
afterAll(async () => {
  await svc?.close();
  await checker.close();
  db?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Max gap between the ticks of a 5 ms interval while `work` runs, and how long it ran. */
async function lateness<T>(work: () => Promise<T>): Promise<{ result: T; took: number; maxGap: number; ticks: number }> {
  const ticks: number[] = [performance.now()];
  const timer = setInterval(() => ticks.push(performance.now()), 5);
  const t0 = performance.now();
  const result = await work();
  const took = performance.now() - t0;
  clearInterval(timer);
  ticks.push(performance.now());
  const gaps = ticks.slice(1).map((t, i) => t - ticks[i]!);
  return { result, took, maxGap: Math.max(...gaps), ticks: ticks.length };
}

describe('LOTL on the list-check thread', () => {
  it('the real EU LOTL: the thread answers as the inline check, and the import accepts it', async () => {
    const signers = dersOfPem(fs.readFileSync(DEFAULT_SIGNERS, 'utf8')).map((d) => d.toString('base64'));
    const onThread = await checker.checkLotl(Buffer.from(lotl), signers);
    const inline = checkLotl(Buffer.from(lotl), signers);
    expect(onThread.kind).toBe('checked');
    expect(JSON.stringify(onThread)).toBe(JSON.stringify(inline));
    expect(onThread).toMatchObject({ verdict: { ok: true } });

    const r = await svc.import([{ name: 'eu-lotl.xml', source: 'import:eu-lotl.xml', bytes: Buffer.from(lotl) }]);
    expect(r.lists[0]).toMatchObject({ outcome: 'accepted', signature: 'valid', territory: 'EU' });
  });

  it('a large LOTL (the real one grown to megabytes) is worked through while the event loop keeps turning', async () => {
    // 120 000 extra elements inside the signed content: megabytes of XML to parse and digest,
    // refused at the end because the signed bytes changed.
    const filler = Array.from({ length: 120_000 }, (_, i) => `<Filler n="${i}">text ${i}</Filler>`).join('');
    const grown = lotl.replace('</SchemeInformation>', `${filler}</SchemeInformation>`);
    expect(grown.length).toBeGreaterThan(lotl.length + 2_500_000);
    const { result, took, maxGap, ticks } = await lateness(() =>
      svc.import([{ name: 'eu-lotl.xml', source: 'import:eu-lotl.xml', bytes: Buffer.from(grown) }]),
    );
    expect(result.lists[0]).toMatchObject({ outcome: 'rejected', territory: 'EU' });
    // Inline, the whole parse and digest would be one gap as long as the import; on the thread
    // the timer keeps firing throughout (the bound is generous for a loaded machine).
    expect(ticks).toBeGreaterThan(5);
    expect(maxGap).toBeLessThan(Math.max(took / 3, 200));
  }, 60_000);
});
