import crypto from 'node:crypto';
import { AppError, safeEqual, sha256Hex, type Tenant } from '../../server/sdk.ts';
import { oauth } from './oauth-errors.ts';
import { IssuerPart } from './part.ts';
import { randomBytes } from './random.ts';
import type { TokenRow } from './repo.ts';
import { PRE_AUTH_GRANT, type IssuerTokenForm } from './schemas.ts';

/** A fresh c_nonce and the hash it is stored by. */
export function freshNonce(): { nonce: string; hash: string } {
  const nonce = randomBytes(24).toString('base64url');
  return { nonce, hash: sha256Hex(nonce) };
}

/** The issuer's token endpoint: both grants, the credential access token, the Nonce Endpoint's c_nonce. */
export class TokenEndpoint extends IssuerPart {
  /** POST /vci.ashx?token: both grants (the OIDC token endpoint takes the pre-authorized one too). */
  async token(tenant: Tenant, form: IssuerTokenForm): Promise<Record<string, unknown>> {
    this.clients.ensureFile(tenant);
    if (form.grant_type === PRE_AUTH_GRANT) return this.preAuthorizedGrant(tenant, form);
    if (form.grant_type === 'authorization_code') return this.authorizationCodeGrant(tenant, form);
    throw new AppError(400, 'unsupported_grant_type', `grant_type ${form.grant_type} is not supported here`);
  }

  /** OpenID4VCI 1.0 §6.1: the pre-authorized code, with the tx_code when the offer set one (§6.3 errors). */
  async preAuthorizedGrant(tenant: Tenant, form: { 'pre-authorized_code'?: string; tx_code?: string }): Promise<Record<string, unknown>> {
    const code = form['pre-authorized_code'];
    if (!code) throw oauth('invalid_request', 'pre-authorized_code is required');
    const o = this.repo.offerByPreAuth(tenant, sha256Hex(code));
    if (!o || o.expires_at < this.nowSec() || o.redeemed_at) throw oauth('invalid_grant', 'the pre-authorized code is unknown, expired or used');
    if (o.tx_code_hash === null && form.tx_code !== undefined) throw oauth('invalid_request', 'this offer expects no tx_code');
    if (o.tx_code_hash !== null) {
      if (form.tx_code === undefined || form.tx_code === '') throw oauth('invalid_request', 'this offer expects a tx_code');
      const given = sha256Hex(`${o.id}|${form.tx_code}`);
      if (!crypto.timingSafeEqual(Buffer.from(given, 'hex'), Buffer.from(o.tx_code_hash, 'hex'))) {
        const n = this.repo.txCodeFailed(tenant, o.id);
        // A guessed 6-digit code must not be brute-forced: the offer dies after a few misses.
        if (n >= this.d.config.txCodeMaxFailures) this.repo.redeemOffer(tenant, o.id, new Date(this.d.clock.now()).toISOString());
        throw oauth('invalid_grant', 'wrong tx_code');
      }
    }
    if (!this.repo.redeemOffer(tenant, o.id, new Date(this.d.clock.now()).toISOString())) throw oauth('invalid_grant', 'the pre-authorized code was used');
    return this.mintToken(tenant, o.id, o.configuration_ids, null);
  }

  /**
   * The authorization code grant of the issuer's authorization server: the code is consumed
   * first (single use even when the exchange fails), then client_id (whitelisted, the one of the
   * PAR), redirect_uri byte for byte, PKCE S256 with a 43–128 character verifier (RFC 7636 §4.1).
   */
  async authorizationCodeGrant(tenant: Tenant, form: IssuerTokenForm): Promise<Record<string, unknown>> {
    if (!form.code) throw oauth('invalid_request', 'code is required');
    const row = this.repo.consumeCode(tenant, sha256Hex(form.code), this.nowSec());
    if (!form.client_id) throw oauth('invalid_client', 'client_id is required for authorization_code');
    if (!this.clients.allowed(tenant, form.client_id)) throw oauth('invalid_client', `client ${form.client_id} is not a whitelisted wallet client`);
    if (!row || row.expires_at < this.nowSec()) throw oauth('invalid_grant', 'the code is unknown, expired or already used');
    if (!safeEqual(row.client_id, form.client_id)) throw oauth('invalid_grant', 'the code was issued to another client');
    if (form.redirect_uri === undefined || !safeEqual(row.redirect_uri, form.redirect_uri))
      throw oauth('invalid_grant', 'redirect_uri does not match the authorization request');
    const v = form.code_verifier;
    if (v === undefined || v.length < 43 || v.length > 128 || !/^[A-Za-z0-9._~-]+$/.test(v)) {
      throw oauth('invalid_request', 'code_verifier must be 43 to 128 characters of [A-Za-z0-9._~-] (RFC 7636 §4.1)');
    }
    if (!safeEqual(crypto.createHash('sha256').update(v).digest('base64url'), row.code_challenge))
      throw oauth('invalid_grant', 'code_verifier does not match the code_challenge');
    const o = this.repo.offer(tenant, row.offer_id);
    if (!o || o.redeemed_at !== null) throw oauth('invalid_grant', 'the offer behind this code is gone');
    if (!this.repo.redeemOffer(tenant, o.id, new Date(this.d.clock.now()).toISOString())) throw oauth('invalid_grant', 'the offer was used');
    return this.mintToken(tenant, o.id, row.configuration_ids, row.user_id);
  }

  private mintToken(tenant: Tenant, offerId: string, configurationIds: string, userId: string | null): Record<string, unknown> {
    const token = 'wat_' + crypto.randomBytes(32).toString('base64url');
    const ttl = this.d.config.accessTokenTtlSec;
    this.repo.insertToken(tenant, {
      token_hash: sha256Hex(token),
      offer_id: offerId,
      configuration_ids: configurationIds,
      expires_at: this.nowSec() + ttl,
      user_id: userId,
    });
    const ids = JSON.parse(configurationIds) as string[];
    return {
      access_token: token,
      token_type: 'Bearer',
      expires_in: ttl,
      // The seed returns c_nonce here; OpenID4VCI 1.0 moved it to the Nonce Endpoint (both work).
      ...this.newNonce(tenant),
      authorization_details: ids.map((id) => ({ type: 'openid_credential', credential_configuration_id: id, credential_identifiers: [id] })),
    };
  }

  /** OpenID4VCI 1.0 §7: a fresh c_nonce (single use, short-lived). */
  newNonce(tenant: Tenant): { c_nonce: string; c_nonce_expires_in: number } {
    const { nonce, hash } = freshNonce();
    this.repo.insertNonce(tenant, hash, this.nowSec() + this.d.config.cNonceTtlSec);
    return { c_nonce: nonce, c_nonce_expires_in: this.d.config.cNonceTtlSec };
  }

  /** The credential access token (opaque, by hash), or undefined. */
  accessToken(tenant: Tenant, token: string): TokenRow | undefined {
    if (!token.startsWith('wat_') || token.length > 100) return undefined;
    const row = this.repo.token(tenant, sha256Hex(token));
    return row && row.expires_at >= this.nowSec() ? row : undefined;
  }
}
