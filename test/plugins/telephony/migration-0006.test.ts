import { describe, expect, it } from 'vitest';
import telephony from '../../../plugins/telephony/index.ts';
import { TelephonyRepo } from '../../../plugins/telephony/repo.ts';
import { storeAt } from '../../support/migrations.ts';

describe('telephony migration 0006-trunk-tls', () => {
  it('a version-5 trunk keeps every column, and a trunk may then be TLS with its own CA', () => {
    const { db, tenant, upgrade } = storeAt(telephony, 5);
    const now = '2026-01-01T00:00:00.000Z';
    db.prepare(
      `INSERT INTO tel_trunks (tenant_id, id, name, host, port, transport, username, password_sealed, register, from_domain, caller_id,
         max_concurrent_calls, codecs, dns_srv, inbound_auth, created_at, updated_at)
       VALUES (?, 'main', 'Main', 'sip.example', 5070, 'tcp', 'u1', 'sealed', 1, 'd.example', '+4930', 7, '["PCMA"]', 1, 'digest', ?, ?)`,
    ).run(tenant.id, now, now);
    expect(() => db.prepare(`UPDATE tel_trunks SET transport = 'tls' WHERE id = 'main'`).run()).toThrow(/CHECK/);
    expect(upgrade()[0]).toBe('0006-trunk-tls');
    const repo = new TelephonyRepo(db);
    expect(repo.trunks(tenant).find((t) => t.id === 'main')).toEqual({
      tenant_id: tenant.id,
      id: 'main',
      name: 'Main',
      host: 'sip.example',
      port: 5070,
      transport: 'tcp',
      username: 'u1',
      password_sealed: 'sealed',
      register: 1,
      from_domain: 'd.example',
      caller_id: '+4930',
      max_concurrent_calls: 7,
      codecs: '["PCMA"]',
      dns_srv: 1,
      inbound_auth: 'digest',
      tls_ca_pem: '',
      srtp: 'off', // migration 0007 (SDES SRTP), which upgrade() also applies
      created_at: now,
      updated_at: now,
    });
    db.prepare(`UPDATE tel_trunks SET transport = 'tls', tls_ca_pem = 'PEM' WHERE id = 'main'`).run();
    expect(repo.trunks(tenant)[0]).toMatchObject({ transport: 'tls', tls_ca_pem: 'PEM' });
    expect(() => db.prepare(`UPDATE tel_trunks SET transport = 'sctp' WHERE id = 'main'`).run()).toThrow(/CHECK/);
    expect(() => db.prepare(`UPDATE tel_trunks SET inbound_auth = 'open' WHERE id = 'main'`).run()).toThrow(/CHECK/);
    db.close();
  });
});
