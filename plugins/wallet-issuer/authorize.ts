import crypto from 'node:crypto';
import { AppError, safeEqual, sha256Hex, type Tenant } from '../../server/sdk.ts';
import { endpoints } from './metadata.ts';
import { oauth } from './oauth-errors.ts';
import { type IssuerBase, IssuerPart } from './part.ts';
import type { RelyingParty } from '../oidc/api.ts';
import { CONFIG_IDS, type ConfigId, type ParForm } from './schemas.ts';

/** The OIDC client (of the tenant's own provider) through which the authorize step signs people in. */
export const SIGN_IN_CLIENT_ID = 'wallet-issuer';
export const SIGN_IN_COOKIE = 'vci_sign_in';
export const SIGN_IN_PATH = '/vci/callback';

/** Who signed in (request facts the OpenID Provider's token endpoint audits). */
export interface SignInRequest {
  ip: string;
  ua: string;
  headers: Record<string, string | string[] | undefined>;
}

const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';

/**
 * PAR and the authorization endpoint of the issuer's authorization server: the wallet's request
 * is checked and parked, the person signs in at the tenant's own OpenID Provider, and the browser
 * goes back to the wallet with our code.
 */
export class Authorization extends IssuerPart {
  /**
   * The public OIDC client `wallet-issuer` of the tenant's own provider (PKCE S256, no consent
   * page: the person is signing in to this appliance), coming back to SIGN_IN_PATH.
   */
  private readonly signIn: RelyingParty;

  constructor(base: IssuerBase) {
    super(base);
    this.signIn = base.d.oidc.relyingParty({ clientId: SIGN_IN_CLIENT_ID, name: 'Wallet issuer sign-in', callbackPath: SIGN_IN_PATH });
  }
  /** RFC 9126 PAR for whitelisted public wallet clients; PKCE S256 mandatory. */
  par(tenant: Tenant, form: ParForm): { request_uri: string; expires_in: number } {
    this.clients.ensureFile(tenant);
    const checked = this.checkAuthorizationRequest(tenant, form);
    const ref = crypto.randomBytes(32).toString('base64url');
    this.repo.insertPar(tenant, sha256Hex(ref), form.client_id, JSON.stringify(checked), this.nowSec() + this.d.config.parTtlSec);
    return { request_uri: REQUEST_URI_PREFIX + ref, expires_in: this.d.config.parTtlSec };
  }

  /**
   * The authorization endpoint: a pushed request (request_uri, one-time, same client_id) or the
   * same parameters in the query. The request is checked and parked; the browser goes to the
   * tenant's own OpenID Provider to sign the person in (password, passkey, e-mail link: whatever
   * its pages offer), which comes back to `signedIn`. `browser` is a random value the route sets
   * as a cookie: only the browser that started the sign-in can finish it.
   */
  authorize(tenant: Tenant, origin: string, q: Record<string, string | undefined>): { location: string; browser: string } {
    this.clients.ensureFile(tenant);
    let req: CheckedAuthz;
    if (q.request_uri !== undefined) {
      if (!q.client_id) throw oauth('invalid_request', 'client_id is required');
      if (!q.request_uri.startsWith(REQUEST_URI_PREFIX)) throw oauth('invalid_request', 'request_uri is not one of this server');
      const par = this.repo.takePar(tenant, sha256Hex(q.request_uri.slice(REQUEST_URI_PREFIX.length)), this.nowSec());
      if (!par || par.expires_at < this.nowSec()) throw oauth('invalid_request', 'request_uri is unknown, expired or used');
      if (!safeEqual(par.client_id, q.client_id)) throw oauth('invalid_client', 'client_id does not match the pushed request');
      req = JSON.parse(par.params) as CheckedAuthz;
    } else {
      req = this.checkAuthorizationRequest(tenant, q as unknown as ParForm);
    }
    const { location, state, verifier, nonce } = this.signIn.start(tenant, origin);
    const browser = crypto.randomBytes(32).toString('base64url');
    this.repo.insertLogin(tenant, {
      state_hash: sha256Hex(state),
      browser_hash: sha256Hex(browser),
      params: JSON.stringify(req),
      sealed_verifier: this.d.keys.seal(verifier, `wi-login|${tenant.id}|${sha256Hex(state)}`),
      nonce,
      expires_at: this.nowSec() + this.d.config.signInTtlSec,
    });
    return { location, browser };
  }

  /**
   * The OpenID Provider sent the browser back (`/vci/callback?code&state`): the code is exchanged
   * in process for the account that signed in, the offer's account binding checked, and the
   * browser sent on to the wallet with our code (bound to that account), state and iss. Failures
   * after the wallet's request is known go back to the wallet as OAuth error redirects.
   */
  async signedIn(
    tenant: Tenant,
    origin: string,
    q: Record<string, string | undefined>,
    browser: string | undefined,
    info: SignInRequest,
  ): Promise<{ location: string; user?: string; error?: string }> {
    if (!q.state) throw oauth('invalid_request', 'state is required');
    const stateHash = sha256Hex(q.state);
    const row = this.repo.takeLogin(tenant, stateHash, this.nowSec());
    if (!row || row.expires_at < this.nowSec())
      throw oauth('invalid_request', 'this sign-in is unknown, expired or already finished; start again from the wallet');
    if (!browser || !safeEqual(sha256Hex(browser), row.browser_hash)) throw oauth('access_denied', 'this sign-in was started in another browser');
    const req = JSON.parse(row.params) as CheckedAuthz;
    const back = (params: Record<string, string>): string => {
      const u = new URL(req.redirect_uri);
      for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
      if (req.state !== undefined) u.searchParams.set('state', req.state);
      u.searchParams.set('iss', endpoints(origin).authorizationServer);
      return u.toString();
    };
    const deny = (description: string) => ({ location: back({ error: 'access_denied', error_description: description }), error: description });
    if (q.error || !q.code) return deny(q.error === 'access_denied' ? 'the person declined or did not sign in' : 'the sign-in did not complete');
    let verifier: string;
    try {
      verifier = this.d.keys.openString(row.sealed_verifier, `wi-login|${tenant.id}|${stateHash}`);
    } catch (e) {
      this.d.log.info({ err: (e as Error).message }, 'wallet issuer sign-in exchange failed');
      return deny('the sign-in could not be confirmed');
    }
    const got = await this.signIn.finish(tenant, origin, { code: q.code, verifier, nonce: row.nonce }, info);
    if ('error' in got) {
      if (got.detail) this.d.log.info({ err: got.detail }, 'wallet issuer sign-in exchange failed');
      return deny(got.error === 'inactive' ? 'the account is not active' : 'the sign-in could not be confirmed');
    }
    const user = got.user;
    const offer = this.repo.offer(tenant, req.offer_id);
    if (!offer || offer.expires_at < this.nowSec() || offer.redeemed_at) return deny('the offer is unknown, expired or used');
    if (offer.subject_user !== null && offer.subject_user.toLowerCase() !== user.name.toLowerCase()) {
      return { ...deny('this offer is for another account'), user: user.name };
    }
    const code = 'wac_' + crypto.randomBytes(32).toString('base64url');
    this.repo.insertCode(tenant, {
      code_hash: sha256Hex(code),
      client_id: req.client_id,
      redirect_uri: req.redirect_uri,
      code_challenge: req.code_challenge,
      offer_id: req.offer_id,
      configuration_ids: JSON.stringify(req.configuration_ids),
      expires_at: this.nowSec() + this.d.config.codeTtlSec,
      user_id: user.id,
    });
    return { location: back({ code }), user: user.name };
  }

  private checkAuthorizationRequest(tenant: Tenant, f: ParForm): CheckedAuthz {
    if (!f.client_id) throw oauth('invalid_request', 'client_id is required');
    if (!this.clients.allowed(tenant, f.client_id)) throw oauth('invalid_client', `client ${f.client_id} is not a whitelisted wallet client`);
    if (f.response_type !== 'code') throw new AppError(400, 'unsupported_response_type', 'response_type must be code');
    if (!f.redirect_uri) throw oauth('invalid_request', 'redirect_uri is required');
    let redirect: URL;
    try {
      redirect = new URL(f.redirect_uri);
    } catch {
      throw oauth('invalid_request', 'redirect_uri is not an absolute URI');
    }
    if (redirect.hash || /^(javascript|data|file|vbscript):$/i.test(redirect.protocol))
      throw oauth('invalid_request', 'redirect_uri must not have a fragment or a script scheme');
    if (!f.code_challenge || !/^[A-Za-z0-9_-]{43}$/.test(f.code_challenge)) throw oauth('invalid_request', 'code_challenge (S256, 43 characters) is required');
    if (f.code_challenge_method !== 'S256') throw oauth('invalid_request', 'code_challenge_method must be S256');
    if (!f.issuer_state) throw oauth('invalid_request', 'issuer_state (from the credential offer) is required');
    const o = this.repo.offerByIssuerState(tenant, sha256Hex(f.issuer_state));
    if (!o || o.expires_at < this.nowSec() || o.redeemed_at)
      throw new AppError(400, 'access_denied', 'the offer of this issuer_state is unknown, expired or used');
    const offered = JSON.parse(o.configuration_ids) as ConfigId[];
    const asked = requestedConfigurations(f);
    if (asked.some((a) => !offered.includes(a))) throw new AppError(400, 'invalid_scope', 'the request asks for a credential the offer does not hold');
    return {
      client_id: f.client_id,
      redirect_uri: f.redirect_uri,
      code_challenge: f.code_challenge,
      state: f.state,
      offer_id: o.id,
      configuration_ids: asked.length ? asked : offered,
    };
  }
}

interface CheckedAuthz {
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  state?: string;
  offer_id: string;
  configuration_ids: ConfigId[];
}

/** Configurations named by scope or authorization_details (OpenID4VCI 1.0 §5.1.1 and §5.1.2). */
function requestedConfigurations(f: ParForm): ConfigId[] {
  const out = new Set<ConfigId>();
  for (const s of (f.scope ?? '').split(' ').filter(Boolean)) if ((CONFIG_IDS as readonly string[]).includes(s)) out.add(s as ConfigId);
  if (f.authorization_details) {
    let details: unknown;
    try {
      details = JSON.parse(f.authorization_details);
    } catch {
      throw oauth('invalid_request', 'authorization_details is not JSON');
    }
    if (!Array.isArray(details)) throw oauth('invalid_request', 'authorization_details must be an array');
    for (const d of details as { type?: unknown; credential_configuration_id?: unknown }[]) {
      if (d?.type !== 'openid_credential') continue;
      if (typeof d.credential_configuration_id !== 'string' || !(CONFIG_IDS as readonly string[]).includes(d.credential_configuration_id)) {
        throw oauth('invalid_request', 'authorization_details names an unknown credential_configuration_id');
      }
      out.add(d.credential_configuration_id as ConfigId);
    }
  }
  return [...out];
}
