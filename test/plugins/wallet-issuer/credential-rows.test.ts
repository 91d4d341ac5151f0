import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IssuerServices } from '../../../plugins/wallet-issuer/index.ts';
import { MDOC_CONFIG_ID, SD_JWT_CONFIG_ID, subjectClaims } from '../../../plugins/wallet-issuer/schemas.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { CLAIMS } from './support.ts';

/**
 * Credential rows are written in groups (full groups of 32 by one multi-row INSERT, the rest one
 * by one): a burst issued in one event-loop turn must leave exactly one row per credential, each
 * with its own status index, offer and format, committed before committed() resolves.
 */
let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ publicOrigin: true });
});
afterAll(async () => {
  await srv?.stop();
});

describe('wallet issuer: credential rows of a burst', () => {
  it('70 credentials issued in one turn (two full groups and six single rows) are all recorded', async () => {
    const { service } = srv.appliance.host.services('wallet-issuer') as IssuerServices;
    const origin = 'https://issuer.rows.example';
    const claims = subjectClaims.parse(CLAIMS);
    const offer = await service.createOffer(
      srv.primary,
      origin,
      { claims, pre_authorized: true, credential_configuration_ids: [SD_JWT_CONFIG_ID, MDOC_CONFIG_ID] },
      'test',
    );
    const j = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    const holder = { jwk: { kty: 'EC' as const, crv: 'P-256' as const, x: String(j.x), y: String(j.y) }, nonce: '' };
    const before = service.credentials(srv.primary, { offerId: offer.offer_id, limit: 500, offset: 0 }).total;
    expect(before).toBe(0);
    // Started together: no turn of the event loop between them, so the rows queue up together.
    const issued = await Promise.all(
      Array.from({ length: 70 }, (_, k) => service.issue(srv.primary, origin, offer.offer_id, k % 2 ? MDOC_CONFIG_ID : SD_JWT_CONFIG_ID, claims, holder)),
    );
    await service.committed();
    expect(issued).toHaveLength(70);
    const { items, total } = service.credentials(srv.primary, { offerId: offer.offer_id, limit: 500, offset: 0 });
    expect(total).toBe(70);
    expect(new Set(items.map((r) => r.id)).size).toBe(70);
    expect(new Set(items.map((r) => `${r.list_id}/${r.idx}`)).size).toBe(70);
    expect(items.filter((r) => r.format === 'mso_mdoc')).toHaveLength(35);
    expect(items.filter((r) => r.format === 'dc+sd-jwt')).toHaveLength(35);
    for (const r of items) {
      expect(r).toMatchObject({ tenant_id: srv.primary.id, offer_id: offer.offer_id, revoked_at: null });
      expect(Date.parse(r.expires_at)).toBeGreaterThan(Date.parse(r.created_at));
      expect(service.status(srv.primary, r.list_id, r.idx)).toBe(0);
    }
    // Each SD-JWT VC names the status entry its row has.
    const sdIdx = issued
      .filter((_, k) => k % 2 === 0)
      .map((c) => (JSON.parse(Buffer.from(c.split('.')[1]!, 'base64url').toString()) as { status: { status_list: { idx: number } } }).status.status_list.idx);
    const rowIdx = new Set(items.filter((r) => r.format === 'dc+sd-jwt').map((r) => r.idx));
    for (const i of sdIdx) expect(rowIdx.has(i)).toBe(true);
  });
});
