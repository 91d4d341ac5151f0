import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { ManualClock } from '../../../server/clock.ts';
import { openStore, type DB } from '../../../server/store/db.ts';
import { migrate, sqlMigrations } from '../../../server/store/migrate.ts';
import { LotlRepo } from '../../../plugins/lotl/repo.ts';
import { LotlService, type Candidate } from '../../../plugins/lotl/service.ts';
import { lotlConfig } from '../../../plugins/lotl/schemas.ts';
import { pemOf } from '../../../plugins/lotl/tsl.ts';
import { sha256Hex } from '../../../plugins/lotl/xades.ts';
import { tempDir } from '../../support/server.ts';
import { listXml, makeSigner, sign, type Signer } from './signer.ts';

// Synthetic lists, signed at run time: a pivot chain (old LOTL signer -> new one) and validly
// signed sequence changes, which the real snapshot cannot provide.
let dir: string;
let db: DB;
let svc: LotlService;
let oldLotlKey: Signer;
let newLotlKey: Signer;
let zzKey: Signer;
let ca1: Signer;
let ca2: Signer;
const clock = new ManualClock(Date.parse('2026-08-22T00:00:00Z'));

const doc = (name: string, xml: string): Candidate => ({ name, source: `import:${name}`, bytes: Buffer.from(xml) });

beforeAll(async () => {
  dir = tempDir('lotl-pivot-');
  [oldLotlKey, newLotlKey, zzKey, ca1, ca2] = await Promise.all(
    ['old LOTL signer', 'new LOTL signer', 'ZZ scheme operator', 'CA one', 'CA two'].map(makeSigner),
  );
  // The operator pinned only the old LOTL signer.
  fs.writeFileSync(path.join(dir, 'pins.pem'), pemOf(oldLotlKey.der));
  db = openStore(path.join(dir, 'data'));
  migrate(db, 'lotl', sqlMigrations(new URL('../../../plugins/lotl/index.ts', import.meta.url).href));
  svc = new LotlService(new LotlRepo(db), lotlConfig.parse({ signersPath: path.join(dir, 'pins.pem') }), clock, pino({ level: 'silent' }));
});

afterAll(() => {
  db?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const lotl = (sequence: number, self: Signer, schemeUris?: string[]) =>
  listXml({
    territory: 'EU',
    lotl: true,
    sequence,
    schemeUris,
    pointers: [
      { territory: 'EU', lotl: true, certs: [self.der] },
      { territory: 'ZZ', certs: [zzKey.der] },
    ],
  });

describe('pivot LOTLs and sequence numbers (synthetic, signed at run time)', () => {
  const current = () => sign(lotl(11, newLotlKey, ['https://eur-lex.example/oj', 'https://lotl.example/tools/eu-lotl-pivot-10.xml']), newLotlKey);
  const pivot = () => sign(lotl(10, newLotlKey), oldLotlKey); // signed by the pinned key, names the new signer

  it('a LOTL signed by a key that is not pinned, with no pivot at hand, is refused', async () => {
    const r = await svc.import([doc('eu-lotl.xml', current())]);
    expect(r.lists[0]).toMatchObject({ territory: 'EU', outcome: 'rejected', reason: 'signer_not_pinned', signature: 'untrusted_signer' });
  });

  it('the pivot LOTL, verified with the pinned key, hands trust on to the new signer', async () => {
    const r = await svc.import([doc('eu-lotl-pivot-10.xml', pivot()), doc('eu-lotl.xml', current())]);
    expect(r.lists.map((l) => `${l.name}:${l.outcome}`)).toEqual(['eu-lotl.xml:accepted', 'eu-lotl-pivot-10.xml:skipped']);
    expect(svc.manifest(null).lotl_sequence).toBe(11);
  });

  it('a pivot signed by a stranger hands on nothing', async () => {
    const stranger = await makeSigner('stranger');
    const forgedPivot = sign(lotl(10, stranger), stranger);
    const forgedCurrent = sign(lotl(12, stranger, ['https://lotl.example/tools/eu-lotl-pivot-10.xml']), stranger);
    const r = await svc.import([doc('eu-lotl-pivot-10.xml', forgedPivot), doc('eu-lotl.xml', forgedCurrent)]);
    expect(r.lists[0]).toMatchObject({ outcome: 'rejected', reason: 'signer_not_pinned' });
    expect(svc.manifest(null).lotl_sequence).toBe(11);
  });

  it('a national list signed by the key its pointer names is stored with its anchors', async () => {
    const r = await svc.import([doc('ZZ_TSL_ZZ.xml', sign(listXml({ territory: 'ZZ', sequence: 5, services: [{ tsp: 'TSP one', cert: ca1.der }] }), zzKey))]);
    expect(r.lists[0]).toMatchObject({ territory: 'ZZ', outcome: 'accepted', signature: 'valid', sequence: 5 });
    expect(svc.anchors('ZZ').map((a) => a.sha256)).toEqual([sha256Hex(ca1.der)]);
    expect(svc.anchorPem(sha256Hex(ca1.der))).toBe(pemOf(ca1.der));
    expect(svc.lookup(sha256Hex(ca1.der))).toEqual({
      pem: pemOf(ca1.der),
      services: [
        {
          country: 'ZZ',
          territory: 'ZZ',
          tspName: 'TSP one',
          serviceName: 'CA',
          serviceType: 'http://uri.etsi.org/TrstSvc/Svctype/CA/QC',
          status: 'http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted',
        },
      ],
    });
    expect(svc.lookup(sha256Hex(ca2.der))).toBeUndefined();
  });

  it('a validly signed older sequence is refused; the stored list and anchors stay', async () => {
    const r = await svc.import([doc('ZZ_TSL_ZZ.xml', sign(listXml({ territory: 'ZZ', sequence: 4, services: [{ tsp: 'TSP two', cert: ca2.der }] }), zzKey))]);
    expect(r.lists[0]).toMatchObject({ outcome: 'rejected', reason: 'older_sequence', signature: 'valid' });
    expect(svc.anchors('ZZ').map((a) => a.sha256)).toEqual([sha256Hex(ca1.der)]);
  });

  it('a newer sequence replaces the list and its anchors as a whole', async () => {
    const r = await svc.import([doc('ZZ_TSL_ZZ.xml', sign(listXml({ territory: 'ZZ', sequence: 6, services: [{ tsp: 'TSP two', cert: ca2.der }] }), zzKey))]);
    expect(r.lists[0]).toMatchObject({ outcome: 'accepted', sequence: 6 });
    expect(svc.anchors('ZZ').map((a) => a.sha256)).toEqual([sha256Hex(ca2.der)]);
    expect(svc.anchorPem(sha256Hex(ca1.der))).toBeUndefined();
  });

  it('a list signed by another key than its pointer names is refused', async () => {
    const r = await svc.import([doc('ZZ_TSL_ZZ.xml', sign(listXml({ territory: 'ZZ', sequence: 7, services: [{ tsp: 'x', cert: ca1.der }] }), ca1))]);
    expect(r.lists[0]).toMatchObject({ outcome: 'rejected', reason: 'signer_not_pinned' });
  });

  it('an online refresh follows the pivot too, fetching it from the (loopback) upstream', async () => {
    const files: Record<string, string> = {
      'eu-lotl.xml': sign(lotl(13, newLotlKey, ['https://lotl.example/tools/eu-lotl-pivot-10.xml']), newLotlKey),
      'eu-lotl-pivot-10.xml': pivot(),
      'ZZ_TSL_ZZ.xml': sign(listXml({ territory: 'ZZ', sequence: 9, services: [{ tsp: 'TSP two', cert: ca2.der }] }), zzKey),
    };
    const seen: string[] = [];
    const srv = http.createServer((req, res) => {
      const name = path.basename(req.url ?? '');
      seen.push(name);
      if (files[name]) res.writeHead(200, { 'Content-Type': 'application/xml' }).end(files[name]);
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const fresh = openStore(path.join(dir, 'data2'));
    try {
      migrate(fresh, 'lotl', sqlMigrations(new URL('../../../plugins/lotl/index.ts', import.meta.url).href));
      const online = new LotlService(
        new LotlRepo(fresh),
        lotlConfig.parse({
          signersPath: path.join(dir, 'pins.pem'),
          mirrorBaseUrl: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/`,
          fetchTimeoutMs: 5000,
        }),
        clock,
        pino({ level: 'silent' }),
      );
      const r = await online.refresh();
      expect(r.lists.map((l) => `${l.territory}:${l.outcome}`)).toEqual(['EU:accepted', 'ZZ:accepted']);
      expect(seen).toEqual(['eu-lotl.xml', 'eu-lotl-pivot-10.xml', 'ZZ_TSL_ZZ.xml']);
      expect(online.lookup(sha256Hex(ca2.der))?.services[0]?.tspName).toBe('TSP two');
    } finally {
      fresh.close();
      await new Promise((r) => srv.close(r));
    }
  });

  it('a list past its NextUpdate goes out of service when the clock passes it, without any job', async () => {
    const r = await svc.import([
      doc(
        'ZZ_TSL_ZZ.xml',
        sign(listXml({ territory: 'ZZ', sequence: 8, nextUpdate: '2026-09-01T00:00:00Z', services: [{ tsp: 'TSP two', cert: ca2.der }] }), zzKey),
      ),
    ]);
    expect(r.lists[0]).toMatchObject({ outcome: 'accepted', stale: false });
    expect(svc.manifest(null).countries_covered).toEqual(['ZZ']);
    clock.set(Date.parse('2026-09-02T00:00:00Z'));
    expect(svc.manifest(null).countries_covered).toEqual([]);
    expect(svc.anchors('ZZ')).toEqual([]);
    expect(svc.health()).toMatchObject({ status: 'degraded' });
  });
});
