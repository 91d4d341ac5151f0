import crypto from 'node:crypto';
import canonicalize from 'canonicalize';
import { loadJose } from './jose.ts';
import { AppError, type Clock, type DB, InputError, type KeyService, NotFoundError, type Tenant } from '../../server/sdk.ts';
import type { VerifierIdentity } from './identity.ts';
import { pemOf } from './x509.ts';

export const NETWORK_TYPES = ['wifi-wpa2-eap', 'wifi-wpa3-eap', 'wifi-wpa2-psk', 'wifi-hotspot20', 'apn-4g', 'apn-5g', 'openvpn', 'wireguard'] as const;
export const EAP_METHODS = ['PEAP', 'TTLS', 'TLS', 'MSCHAPv2'] as const;
export type NetworkType = (typeof NETWORK_TYPES)[number];

export interface NetworkProfile {
  name: string;
  network_type: NetworkType;
  ssid: string | null;
  eap_method: string | null;
  identity_template: string;
  ttl_minutes: number;
  created_at: string;
}

export const DEFAULT_IDENTITY_TEMPLATE = '{given_name}.{family_name}@{host}';
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const aad = (t: Tenant, session: string) => `wallet-verifier:netcfg:${t.id}:${session}`;

/** Network access profiles and the signed NetworkConfig (spec NetworkConfig). */
export class NetworkProfiles {
  constructor(
    private readonly db: DB,
    private readonly keys: KeyService,
    private readonly clock: Clock,
  ) {}

  add(tenant: Tenant, p: { name: string; type: string; ssid?: string; eapMethod?: string; identityTemplate?: string; ttlMinutes?: number }): NetworkProfile {
    if (!NAME.test(p.name)) throw new InputError('profile name: letters, digits, . _ - (up to 64)', 'invalid_request');
    if (!(NETWORK_TYPES as readonly string[]).includes(p.type)) throw new InputError(`type: one of ${NETWORK_TYPES.join(', ')}`, 'invalid_request');
    const wifi = p.type.startsWith('wifi-');
    const eap = p.type.endsWith('-eap') || p.type === 'wifi-hotspot20';
    if (wifi && !p.ssid && p.type !== 'wifi-hotspot20') throw new InputError(`--ssid is required for ${p.type}`, 'invalid_request');
    if (!wifi && p.ssid) throw new InputError(`--ssid applies to wifi-* types only`, 'invalid_request');
    if (p.eapMethod && !(EAP_METHODS as readonly string[]).includes(p.eapMethod))
      throw new InputError(`eap method: one of ${EAP_METHODS.join(', ')}`, 'invalid_request');
    if (p.eapMethod && !eap) throw new InputError(`an EAP method applies to EAP profiles only`, 'invalid_request');
    const ttl = p.ttlMinutes ?? 480;
    if (!Number.isInteger(ttl) || ttl < 1 || ttl > 10_080) throw new InputError('ttl minutes: 1 to 10080', 'invalid_request');
    const tpl = p.identityTemplate ?? DEFAULT_IDENTITY_TEMPLATE;
    if (tpl.length > 200 || /\{(?![a-z_0-9]+\})/.test(tpl)) throw new InputError('identity template: text with {claim} placeholders', 'invalid_request');
    const row: NetworkProfile = {
      name: p.name,
      network_type: p.type as NetworkType,
      ssid: p.ssid ?? null,
      eap_method: p.eapMethod ?? (eap ? 'PEAP' : null),
      identity_template: tpl,
      ttl_minutes: ttl,
      created_at: new Date(this.clock.now()).toISOString(),
    };
    const r = this.db
      .prepare(
        'INSERT OR IGNORE INTO vp_network_profile (tenant_id, name, network_type, ssid, eap_method, identity_template, ttl_minutes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(tenant.id, row.name, row.network_type, row.ssid, row.eap_method, row.identity_template, row.ttl_minutes, row.created_at);
    if (!r.changes) throw new AppError(409, 'conflict', `profile ${p.name} exists`, { reason: 'profile_exists', params: { name: p.name } });
    return row;
  }

  list(tenant: Tenant): NetworkProfile[] {
    return this.db
      .prepare(
        'SELECT name, network_type, ssid, eap_method, identity_template, ttl_minutes, created_at FROM vp_network_profile WHERE tenant_id = ? ORDER BY name',
      )
      .all(tenant.id) as NetworkProfile[];
  }

  get(tenant: Tenant, name: string): NetworkProfile | undefined {
    return this.db
      .prepare(
        'SELECT name, network_type, ssid, eap_method, identity_template, ttl_minutes, created_at FROM vp_network_profile WHERE tenant_id = ? AND name = ?',
      )
      .get(tenant.id, name) as NetworkProfile | undefined;
  }

  remove(tenant: Tenant, name: string): void {
    if (!this.db.prepare('DELETE FROM vp_network_profile WHERE tenant_id = ? AND name = ?').run(tenant.id, name).changes)
      throw new NotFoundError(`no profile ${name}`);
  }

  /**
   * Issues the NetworkConfig of a verified session: identity from the PID claims by the profile's
   * template, an ephemeral password/PSK (none for EAP-TLS), the tenant CA, expires_at, and
   * `signature`: a compact JWS (ES256, x5c = the verifier certificate) whose payload is the RFC
   * 8785 canonical JSON of every other field.
   */
  async issue(tenant: Tenant, sessionId: string, profileName: string, claims: Record<string, unknown>, id: VerifierIdentity): Promise<Record<string, unknown>> {
    const p = this.get(tenant, profileName);
    if (!p) throw new NotFoundError(`network profile ${profileName} no longer exists`);
    const vars: Record<string, string> = { host: tenant.host };
    for (const [k, v] of Object.entries(claims)) if (typeof v === 'string' || typeof v === 'number') vars[k] = String(v);
    const identity = p.identity_template
      .replace(/\{([a-z_0-9]+)\}/g, (_m, k: string) => (vars[k] ?? '').normalize('NFKD').replace(/[\u0300-\u036f]/g, ''))
      .toLowerCase()
      .replace(/[^a-z0-9@._+-]/g, '');
    const body: Record<string, unknown> = {
      profile_id: p.name,
      network_type: p.network_type,
      ...(p.ssid ? { ssid: p.ssid } : {}),
      ...(p.eap_method ? { eap_method: p.eap_method } : {}),
      identity,
      ...(p.eap_method === 'TLS' ? {} : { password_or_psk: crypto.randomBytes(18).toString('base64url') }),
      ca_certificate_pem: pemOf(id.caDer),
      expires_at: new Date(this.clock.now() + p.ttl_minutes * 60_000).toISOString(),
    };
    const canonical = canonicalize(body)!;
    const J = await loadJose();
    const signature = await new J.CompactSign(new TextEncoder().encode(canonical))
      .setProtectedHeader({ alg: 'ES256', typ: 'network-config+jws', x5c: id.x5c.map((d) => d.toString('base64')) })
      .sign(id.key);
    const out = { ...body, signature };
    this.db
      .prepare('INSERT INTO vp_network_config (tenant_id, session_id, sealed_body, expires_at) VALUES (?, ?, ?, ?)')
      .run(tenant.id, sessionId, this.keys.seal(JSON.stringify(out), aad(tenant, sessionId)), body.expires_at as string);
    return out;
  }

  /** GET network-config: the same config until it expires; 404 for unknown or expired. */
  config(tenant: Tenant, sessionId: string): { body: Record<string, unknown>; expiresAt: string } {
    const row = this.db.prepare('SELECT sealed_body, expires_at FROM vp_network_config WHERE tenant_id = ? AND session_id = ?').get(tenant.id, sessionId) as
      { sealed_body: string; expires_at: string } | undefined;
    if (!row || Date.parse(row.expires_at) <= this.clock.now()) throw new NotFoundError('no network configuration for this session (unknown or expired)');
    return { body: JSON.parse(this.keys.openString(row.sealed_body, aad(tenant, sessionId))) as Record<string, unknown>, expiresAt: row.expires_at };
  }
}
