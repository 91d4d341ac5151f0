import crypto from 'node:crypto';
import { InputError, NotFoundError, sha256Hex, type Tenant } from '../../server/sdk.ts';
import { endpoints } from './metadata.ts';
import { IssuerPart } from './part.ts';
import type { OfferRow } from './repo.ts';
import { MDOC_CONFIG_ID, PRE_AUTH_GRANT, SD_JWT_CONFIG_ID, type ConfigId, type CreateOfferBody } from './schemas.ts';

/**
 * What `vci-offer-create` records, the same from the API and the CLI: the offer, its
 * configurations, the grant, whether a tx_code was made (never the code) and the one account
 * bound to an authorization code offer, if any.
 */
export function offerAuditExtra(
  out: { offer_id: string; credential_configuration_ids: string[]; pre_authorized: boolean; tx_code?: string },
  user: string | undefined,
): Record<string, string | boolean> {
  return {
    offer: out.offer_id,
    configurations: out.credential_configuration_ids.join(','),
    pre_authorized: out.pre_authorized,
    tx_code: !!out.tx_code,
    ...(user !== undefined ? { for_user: user } : {}),
  };
}

export const FORMAT_OF: Record<ConfigId, 'dc+sd-jwt' | 'mso_mdoc'> = { [SD_JWT_CONFIG_ID]: 'dc+sd-jwt', [MDOC_CONFIG_ID]: 'mso_mdoc' };

/** Credential offers (OpenID4VCI 1.0 §4.1): made by an admin, served to the wallet behind `credential_offer_uri`. */
export class Offers extends IssuerPart {
  async createOffer(
    tenant: Tenant,
    origin: string,
    body: CreateOfferBody,
    who: string,
  ): Promise<{
    offer_id: string;
    credential_offer_uri: string;
    offer_uri: string;
    qr_page: string;
    credential_configuration_ids: string[];
    pre_authorized: boolean;
    tx_code?: string;
    expires_at: string;
  }> {
    const ids: ConfigId[] = body.credential_configuration_ids ?? [body.format === 'mso_mdoc' ? MDOC_CONFIG_ID : SD_JWT_CONFIG_ID];
    if (body.format && body.credential_configuration_ids && !body.credential_configuration_ids.every((i) => FORMAT_OF[i] === body.format)) {
      throw new InputError('format and credential_configuration_ids disagree');
    }
    if (body.tx_code !== undefined && body.tx_code !== false && !body.pre_authorized)
      throw new InputError('tx_code needs pre_authorized (OpenID4VCI 1.0 §4.1.1)');
    if (body.user !== undefined) {
      if (body.pre_authorized) throw new InputError('user binds an authorization code offer (pre_authorized: false): only a sign-in can prove the account');
      const u = this.d.users.byLogin(tenant, body.user);
      if (!u || u.status !== 'active') throw new InputError(`user: no active account ${body.user} in this tenant`);
    }
    const ttl = body.expires_in ?? this.d.config.offerTtlSec;
    if (ttl > this.d.config.maxOfferTtlSec) throw new InputError(`expires_in: at most ${this.d.config.maxOfferTtlSec} s`);
    // The keys exist before any wallet asks for a credential of this offer.
    await this.keys.ensure(tenant);
    const id = 'off_' + crypto.randomBytes(12).toString('base64url');
    const preAuth = body.pre_authorized ? 'pac_' + crypto.randomBytes(32).toString('base64url') : undefined;
    const txCode = body.pre_authorized && body.tx_code ? (typeof body.tx_code === 'string' ? body.tx_code : randomDigits(6)) : undefined;
    const issuerState = 'ist_' + crypto.randomBytes(32).toString('base64url');
    const expiresAt = this.nowSec() + ttl;
    this.repo.insertOffer(tenant, {
      id,
      configuration_ids: JSON.stringify(ids),
      sealed_claims: this.d.keys.seal(JSON.stringify(body.claims), `wi-claims|${tenant.id}|${id}`),
      pre_auth_hash: preAuth ? sha256Hex(preAuth) : null,
      tx_code_hash: txCode ? sha256Hex(`${id}|${txCode}`) : null,
      tx_code_length: txCode ? txCode.length : null,
      issuer_state_hash: preAuth ? null : sha256Hex(issuerState),
      // The offer JSON carries the code or issuer_state: sealed, so GET ?offer can serve it again.
      sealed_grant: this.d.keys.seal(preAuth ?? issuerState, `wi-offer|${tenant.id}|${id}`),
      created_by: who,
      created_at: new Date(this.d.clock.now()).toISOString(),
      expires_at: expiresAt,
      subject_user: body.user ?? null,
    });
    const e = endpoints(origin);
    const offerUri = `openid-credential-offer://?credential_offer_uri=${encodeURIComponent(e.offer(id))}`;
    return {
      offer_id: id,
      credential_offer_uri: e.offer(id),
      offer_uri: offerUri,
      qr_page: e.offerPage(id),
      credential_configuration_ids: ids,
      pre_authorized: !!preAuth,
      ...(txCode ? { tx_code: txCode } : {}),
      expires_at: new Date(expiresAt * 1000).toISOString(),
    };
  }

  liveOffer(tenant: Tenant, id: string): OfferRow {
    const o = this.repo.offer(tenant, id);
    if (!o || o.expires_at < this.nowSec()) throw new NotFoundError(`no offer ${id} (unknown or expired)`);
    if (o.redeemed_at) throw new NotFoundError(`offer ${id} was already used`);
    return o;
  }

  /** The Credential Offer object (OpenID4VCI 1.0 §4.1.1) behind `credential_offer_uri`. */
  offerObject(tenant: Tenant, origin: string, id: string): Record<string, unknown> {
    const o = this.liveOffer(tenant, id);
    const secret = this.d.keys.openString(o.sealed_grant, `wi-offer|${tenant.id}|${o.id}`);
    const grants: Record<string, unknown> = {};
    if (o.pre_auth_hash !== null) {
      grants[PRE_AUTH_GRANT] = {
        'pre-authorized_code': secret,
        ...(o.tx_code_length ? { tx_code: { input_mode: 'numeric', length: o.tx_code_length, description: 'The code you were given with this offer' } } : {}),
      };
    } else {
      grants.authorization_code = { issuer_state: secret, authorization_server: endpoints(origin).authorizationServer };
    }
    return { credential_issuer: endpoints(origin).credentialIssuer, credential_configuration_ids: JSON.parse(o.configuration_ids) as string[], grants };
  }

  offerUri(origin: string, id: string): string {
    return `openid-credential-offer://?credential_offer_uri=${encodeURIComponent(endpoints(origin).offer(id))}`;
  }

  /** Whether an offer exists and is usable (the QR page). */
  offerAlive(tenant: Tenant, id: string): boolean {
    try {
      this.liveOffer(tenant, id);
      return true;
    } catch {
      return false;
    }
  }
}

function randomDigits(n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += String(crypto.randomInt(10));
  return s;
}
