import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkNationalList, heapLimitsFor, ListChecker, type SignerSet } from '../../../plugins/lotl/check.ts';
import { lotlConfig } from '../../../plugins/lotl/schemas.ts';
import { listXml, makeSigner, sign, type Signer } from './signer.ts';
import { fixtureNames, SNAPSHOT } from './support.ts';

/**
 * The list-check thread's heap is capped from the document it checks (heapLimitsFor), so that an
 * import does not leave a thread with several times the heap it needs (issue 25: import peak
 * RSS). A cap must never cost a list: a signed list near maxListBytes verifies under the cap it
 * is given, and a thread that runs out of memory under a cap gets the check done on one without.
 */
let signer: Signer;
const checkers: ListChecker[] = [];
const checker = (c: ListChecker) => (checkers.push(c), c);

beforeAll(async () => {
  signer = await makeSigner('Heap Test Signer');
});
afterAll(() => Promise.all(checkers.map((c) => c.close())));

const setFor = (territory: string): SignerSet[] => [{ territory, signers: [signer.der.toString('base64')] }];

describe('heap limits of the list-check thread', () => {
  it('every list of the real 2026-08 snapshot is checked by one thread with the smallest cap', () => {
    for (const f of fixtureNames()) {
      const l = heapLimitsFor(fs.readFileSync(path.join(SNAPSHOT, f)));
      expect(l.maxOldGenerationSizeMb, f).toBe(128);
      expect(l.maxYoungGenerationSizeMb).toBeGreaterThan(0);
    }
  });

  it('a signed list just under maxListBytes (32 MiB) verifies on the thread under the cap derived for it', { timeout: 180_000 }, async () => {
    const max = lotlConfig.parse({}).maxListBytes;
    // Denser markup than the real lists (about 27,000 '<' per MB against ES's 14,000): harder on the cap.
    const one = listXml({ territory: 'XX', sequence: 1, services: [{ tsp: 'TSP 0', cert: signer.der }] });
    const perService = one.length - listXml({ territory: 'XX', sequence: 1 }).length;
    const n = Math.floor((max - 8192) / perService);
    const services = Array.from({ length: n }, (_, i) => ({ tsp: `TSP ${i}`, cert: signer.der }));
    const bytes = Buffer.from(sign(listXml({ territory: 'XX', sequence: 1, services }), signer));
    expect(bytes.length).toBeLessThanOrEqual(max);
    expect(bytes.length).toBeGreaterThan(max * 0.95);
    const limits = heapLimitsFor(bytes);
    expect(limits.maxOldGenerationSizeMb).toBeGreaterThan(128);
    const c = checker(new ListChecker());
    const r = await c.check(bytes, 'XX', setFor('XX'));
    expect(r).toMatchObject({ kind: 'checked', verdict: { ok: true } });
    if (r.kind === 'checked') expect(r.tsl.services).toHaveLength(n);
    // Checked by the capped thread itself, not by the retry without a cap.
    expect(c.threadCapMb).toBe(limits.maxOldGenerationSizeMb);
    // The next, small list gets a thread with the small cap again (the big heap is let go).
    await c.check(Buffer.from(listXml({ territory: 'XX', sequence: 2 })), 'XX', setFor('XX'));
    expect(c.threadCapMb).toBe(128);
  });

  it('a thread out of memory under a cap: the check is done again without one, same answer as inline', { timeout: 120_000 }, async () => {
    const es = fs.readFileSync(path.join(SNAPSHOT, 'ES_TSL_ES.xml'));
    const tooSmall = new ListChecker(() => ({ maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 1 }));
    checker(tooSmall);
    const r = await tooSmall.check(es, 'ES', []);
    expect(r).toEqual(checkNationalList(es, 'ES', []));
    expect(r).toMatchObject({ kind: 'checked', tsl: { territory: 'ES' } });
    expect(tooSmall.threadCapMb).toBeUndefined();
  });
});
