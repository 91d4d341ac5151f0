import crypto from 'node:crypto';
import {
  AppError,
  type AuditWriter,
  type Clock,
  type DB,
  InputError,
  type KeyService,
  type Logger,
  NotFoundError,
  type Paths,
  safeEqual,
  sha256Hex,
  type Tenant,
  type UserService,
} from '../../server/sdk.ts';
import { IssuerKeys } from './keys.ts';
import type * as MdocModule from './mdoc.ts';
import type * as SdJwtModule from './sdjwt.ts';
import { authorizationServerMetadata, endpoints, issuerMetadata } from './metadata.ts';
import { invalidProof, verifyCwtProof, verifyJwtProof, type ProvenKey } from './proof.ts';
import { IssuerRepo, type CredentialRow, type OfferRow, type TokenRow } from './repo.ts';
import {
  CONFIG_IDS,
  MDOC_CONFIG_ID,
  PID_DOCTYPE,
  PID_VCT,
  PRE_AUTH_GRANT,
  SD_JWT_CONFIG_ID,
  subjectClaims,
  type ConfigId,
  type CreateOfferBody,
  type CredentialBody,
  type IssuerConfig,
  type IssuerTokenForm,
  type ParForm,
  type SubjectClaims,
} from './schemas.ts';
import { statusListToken } from './status-list.ts';
import { randomBase64url, randomBytes } from './random.ts';
import { WalletClients } from './wallet-clients.ts';
import type { OidcService, RelyingParty } from '../oidc/api.ts';

export interface IssuerDeps {
  db: DB;
  keys: KeyService;
  clock: Clock;
  config: IssuerConfig;
  log: Logger;
  paths: Paths;
  audit: AuditWriter;
  users: UserService;
  /** The tenant's own OpenID Provider: the authorization code flow signs the person in there. */
  oidc: OidcService;
}

/**
 * What `vci.offer-create` records, the same from the API and the CLI: the offer, its
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

function oauth(code: 'invalid_grant' | 'invalid_client' | 'invalid_request' | 'unsupported_grant_type' | 'access_denied', description: string): AppError {
  return new AppError(code === 'invalid_client' ? 401 : 400, code, description);
}

const FORMAT_OF: Record<ConfigId, 'dc+sd-jwt' | 'mso_mdoc'> = { [SD_JWT_CONFIG_ID]: 'dc+sd-jwt', [MDOC_CONFIG_ID]: 'mso_mdoc' };
const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';
const STATUS_BLOCK = 64;
const CREDENTIAL_ROWS_PER_INSERT = 32;
const STATUS_BLOCK_MAX = 4096;
// The credential formats' libraries load on first issuance (start-up time), once: a repeated
// dynamic import still walks the module loader on every call.
let sdJwtModule: Promise<typeof SdJwtModule> | undefined;
let mdocModule: Promise<typeof MdocModule> | undefined;
// Once loaded, used directly: an await of the settled import is still a promise turn per credential.
let sdJwtLoaded: typeof SdJwtModule | undefined;
let mdocLoaded: typeof MdocModule | undefined;

/**
 * The wallet issuer (OpenID4VCI 1.0 and the seed's shapes): offers, the pre-authorized and
 * authorization code grants, PAR, nonces, the credential endpoint (SD-JWT VC and mdoc), the
 * Token Status List and revocation. No HTTP in here; routes.ts maps requests onto it.
 */
export class IssuerService {
  readonly repo: IssuerRepo;
  readonly keys: IssuerKeys;
  readonly clients: WalletClients;
  readonly #statusCache = new Map<string, { jwt: string; until: number; revoked: number }>();
  /**
   * The public OIDC client `wallet-issuer` of the tenant's own provider (PKCE S256, no consent
   * page: the person is signing in to this appliance), coming back to SIGN_IN_PATH.
   */
  readonly #signIn: RelyingParty;

  constructor(private readonly d: IssuerDeps) {
    this.#signIn = d.oidc.relyingParty({ clientId: SIGN_IN_CLIENT_ID, name: 'Wallet issuer sign-in', callbackPath: SIGN_IN_PATH });
    this.repo = new IssuerRepo(d.db);
    this.keys = new IssuerKeys(d.db, d.keys, d.clock, d.config, d.log);
    this.clients = new WalletClients(d.paths, d.clock, d.config.defaultWalletClientId, d.log);
  }

  get config(): IssuerConfig {
    return this.d.config;
  }

  nowSec(): number {
    return Math.floor(this.d.clock.now() / 1000);
  }

  // ---- metadata and keys -------------------------------------------------------------------------

  metadata(origin: string): Record<string, unknown> {
    return issuerMetadata(origin, this.d.config);
  }

  authorizationServer(origin: string): Record<string, unknown> {
    return authorizationServerMetadata(origin);
  }

  async jwks(tenant: Tenant): Promise<{ keys: Record<string, unknown>[] }> {
    return { keys: (await this.keys.published(tenant)).map((k) => k.jwk) };
  }

  async iaca(tenant: Tenant): Promise<{ der: Buffer; pem: string }> {
    const k = await this.keys.iaca(tenant);
    return { der: k.certDer, pem: this.keys.iacaPem(k.certDer) };
  }

  // ---- offers ------------------------------------------------------------------------------------

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

  private liveOffer(tenant: Tenant, id: string): OfferRow {
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

  // ---- token endpoint ----------------------------------------------------------------------------

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
    const { nonce, hash } = this.freshNonce();
    this.repo.insertNonce(tenant, hash, this.nowSec() + this.d.config.cNonceTtlSec);
    return { c_nonce: nonce, c_nonce_expires_in: this.d.config.cNonceTtlSec };
  }

  private freshNonce(): { nonce: string; hash: string } {
    const nonce = randomBytes(24).toString('base64url');
    return { nonce, hash: sha256Hex(nonce) };
  }

  #spend: ((t: Tenant, nonceHash: string, row: TokenRow, n: number, at: number, nextHash: string) => OfferRow | 'nonce' | 'offer' | 'spent') | undefined;

  /** The credential access token (opaque, by hash), or undefined. */
  accessToken(tenant: Tenant, token: string): TokenRow | undefined {
    if (!token.startsWith('wat_') || token.length > 100) return undefined;
    const row = this.repo.token(tenant, sha256Hex(token));
    return row && row.expires_at >= this.nowSec() ? row : undefined;
  }

  // ---- PAR and authorize -------------------------------------------------------------------------

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
    const { location, state, verifier, nonce } = this.#signIn.start(tenant, origin);
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
    const got = await this.#signIn.finish(tenant, origin, { code: q.code, verifier, nonce: row.nonce }, info);
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

  // ---- credential endpoint -----------------------------------------------------------------------

  /**
   * POST /vci.ashx?credential: the seed's `format` + `vct`/`doctype` with `proof`, or OpenID4VCI
   * 1.0's `credential_configuration_id` with `proofs`. One credential per proof, each bound to its
   * key; the proofs share one c_nonce, taken once.
   */
  async credential(tenant: Tenant, origin: string, token: TokenRow, body: CredentialBody): Promise<Record<string, unknown>> {
    this.clients.ensureFile(tenant);
    const configId = this.requestedConfiguration(body);
    const allowed = JSON.parse(token.configuration_ids) as string[];
    if (!allowed.includes(configId)) throw new AppError(403, 'insufficient_scope', `the access token does not cover ${configId}`);
    const proofs = this.proofsOf(body, FORMAT_OF[configId]);
    const now = this.nowSec();
    const aud = endpoints(origin).credentialIssuer;
    const keys: ProvenKey[] = [];
    for (const p of proofs) keys.push(p.type === 'jwt' ? await verifyJwtProof(p.value, aud, now) : verifyCwtProof(p.value, aud, now));
    const nonce = keys[0]!.nonce;
    if (keys.some((k) => k.nonce !== nonce)) throw invalidProof('all proofs of one request must carry the same nonce');
    let email: string | undefined;
    if (token.user_id !== null) {
      // Signed in at the authorization step: the account must still be active, and its e-mail
      // address (the one attribute of an account a PID carries) replaces the offer's.
      const user = this.d.oidc.activeUser(tenant, token.user_id);
      if (!user) throw new AppError(403, 'credential_request_denied', 'the account that signed in is no longer active');
      email = user.email ?? undefined;
    }
    // Nonce taken, token spent and the next nonce stored in one transaction (one commit, not three).
    const next = this.freshNonce();
    const step = (this.#spend ??= this.d.db.transaction((t: Tenant, nonceHash: string, row: TokenRow, n: number, at: number, nextHash: string) => {
      if (!this.repo.takeNonce(t, nonceHash, at)) return 'nonce' as const;
      const o = this.repo.offer(t, row.offer_id);
      if (!o) return 'offer' as const;
      if (!this.repo.spendToken(t, row.token_hash, n, this.d.config.credentialsPerToken)) return 'spent' as const;
      this.repo.insertNonce(t, nextHash, at + this.d.config.cNonceTtlSec);
      return o;
    }))(tenant, sha256Hex(nonce), token, keys.length, now, next.hash);
    if (step === 'nonce')
      throw new AppError(400, 'invalid_nonce', 'the proof nonce is unknown, expired or already used; get a fresh one from the Nonce Endpoint');
    if (step === 'offer') throw new AppError(403, 'insufficient_scope', 'the offer behind this token is gone');
    if (step === 'spent')
      throw new AppError(403, 'credential_request_denied', `this access token has obtained its ${this.d.config.credentialsPerToken} credentials`);
    const offer = step;
    const claims = subjectClaims.parse(JSON.parse(this.d.keys.openString(offer.sealed_claims, `wi-claims|${tenant.id}|${offer.id}`)));
    if (email) claims.email = email;
    const credentials: string[] = [];
    for (const k of keys) credentials.push(await this.issue(tenant, origin, offer.id, configId, claims, k));
    // No credential leaves before its row is committed: one the appliance had no record of could
    // never be revoked. The commit is shared with the other requests of this event-loop turn.
    await this.committed();
    const format = FORMAT_OF[configId];
    return {
      credentials: credentials.map((credential) => ({ credential })),
      // The seed's single-credential shape beside 1.0's list.
      credential: credentials[0],
      format,
      c_nonce: next.nonce,
      c_nonce_expires_in: this.d.config.cNonceTtlSec,
    };
  }

  /** Issues one credential of `configId` for `holder` (also the benchmark's entry). */
  async issue(tenant: Tenant, origin: string, offerId: string, configId: ConfigId, claims: SubjectClaims, holder: ProvenKey): Promise<string> {
    const key = this.keys.activeLoaded(tenant) ?? (await this.keys.active(tenant));
    const now = this.d.clock.now();
    const exp = now + this.d.config.credentialTtlDays * 86_400_000;
    const { listId, idx } = this.reserveStatus(tenant);
    // Time-ordered ids (ms in base 36, then 72 random bits): rows append to the end of the primary
    // key's B-tree instead of dirtying a random page each.
    const id = `cred_${now.toString(36).padStart(9, '0')}${randomBase64url(9)}`;
    let credential: string;
    // Formatted once, for the row and (mdoc) the MSO's validity.
    const createdAt = new Date(now).toISOString();
    const expiresAt = new Date(exp).toISOString();
    // endpoints(origin).statusList(listId), without building the whole address table per credential.
    const statusUri = `${origin}/vci.ashx?status-list=${listId}`;
    if (configId === SD_JWT_CONFIG_ID) {
      const { issueSdJwt } = (sdJwtLoaded ??= await (sdJwtModule ??= import('./sdjwt.ts')));
      credential = await issueSdJwt({
        issuer: origin,
        key,
        holder: holder.jwk,
        claims,
        iat: Math.floor(now / 1000),
        exp: Math.floor(exp / 1000),
        status: { idx, uri: statusUri },
      });
    } else {
      const { issueMdoc } = (mdocLoaded ??= await (mdocModule ??= import('./mdoc.ts')));
      credential = (
        await issueMdoc({
          key,
          holder: holder.jwk,
          claims,
          country: this.d.config.country,
          authority: this.d.config.displayName,
          signed: createdAt,
          validUntil: expiresAt,
          status: { idx, uri: statusUri },
        })
      ).toString('base64url');
    }
    this.queueCredential(tenant, {
      id,
      offer_id: offerId,
      format: FORMAT_OF[configId],
      list_id: listId,
      idx,
      created_at: createdAt,
      expires_at: expiresAt,
    });
    return credential;
  }

  // ---- credential rows, written in groups --------------------------------------------------------

  readonly #rows: PendingRow[] = [];
  #flushQueued = false;
  #insertRows: ((rows: PendingRow[]) => void) | undefined;

  /**
   * A credential's row (its id, offer and status index) is written with the others issued in the
   * same event-loop turn, in one transaction (at most 256 rows): a commit per credential cost more
   * than its signature. The credential endpoint answers only after that commit (committed()), so
   * nothing handed to a wallet is unrecorded; everything that reads the rows here (revoke, the
   * list, status, the status list token) writes the pending ones first.
   */
  private queueCredential(tenant: Tenant, row: PendingRow[1]): void {
    this.#rows.push([tenant, row]);
    if (this.#rows.length >= 256) this.flushCredentials();
    else if (!this.#flushQueued) {
      this.#flushQueued = true;
      this.#committed = new Promise<void>((resolve, reject) =>
        setImmediate(() => {
          this.#flushQueued = false;
          this.#committed = undefined;
          try {
            this.flushCredentials();
            resolve();
          } catch (e) {
            reject(e as Error);
          }
        }),
      );
      // Awaited by the requests that queued rows; flushCredentials() already logged a failure.
      this.#committed.catch(() => undefined);
    }
  }

  #committed: Promise<void> | undefined;

  /** Resolves once every credential row queued so far is committed (rejects if the write failed). */
  committed(): Promise<void> {
    if (!this.#rows.length) return Promise.resolve();
    return this.#committed ?? Promise.resolve(this.flushCredentials());
  }

  /** Writes the pending credential rows (one transaction). */
  flushCredentials(): void {
    if (this.#rows.length === 0) return;
    const rows = this.#rows.splice(0);
    this.#insertRows ??= this.d.db.transaction((rs: PendingRow[]) => {
      // Full groups through one multi-row INSERT each (a statement per row cost a fifth of the
      // row's insert in binding and stepping), the rest one by one.
      let i = 0;
      for (; i + CREDENTIAL_ROWS_PER_INSERT <= rs.length; i += CREDENTIAL_ROWS_PER_INSERT) this.repo.insertCredentials(rs, i, CREDENTIAL_ROWS_PER_INSERT);
      for (; i < rs.length; i++) this.repo.insertCredential(rs[i]![0], rs[i]![1]);
    });
    try {
      this.#insertRows(rows);
    } catch (e) {
      this.d.log.error({ err: (e as Error).message, count: rows.length }, 'wallet issuer: credential rows could not be written');
      throw e;
    }
  }

  private requestedConfiguration(b: CredentialBody): ConfigId {
    if (b.credential_configuration_id !== undefined || b.credential_identifier !== undefined) {
      if (b.format !== undefined) throw new AppError(400, 'invalid_credential_request', 'send either format or credential_configuration_id, not both');
      const id = b.credential_configuration_id ?? b.credential_identifier!;
      if (!(CONFIG_IDS as readonly string[]).includes(id))
        throw new AppError(400, 'unknown_credential_configuration', `unknown credential configuration ${id}`);
      return id as ConfigId;
    }
    if (b.format === 'dc+sd-jwt' || b.format === 'vc+sd-jwt') {
      if (b.vct !== PID_VCT) throw new AppError(400, 'unsupported_credential_type', `vct must be ${PID_VCT}`);
      return SD_JWT_CONFIG_ID;
    }
    if (b.format === 'mso_mdoc') {
      if (b.doctype !== PID_DOCTYPE) throw new AppError(400, 'unsupported_credential_type', `doctype must be ${PID_DOCTYPE}`);
      return MDOC_CONFIG_ID;
    }
    if (b.format !== undefined) throw new AppError(400, 'unsupported_credential_format', `format ${b.format} is not issued here`);
    throw new AppError(400, 'invalid_credential_request', 'credential_configuration_id or format is required');
  }

  /** The proofs of a request, checked for shape: seed `proof` or 1.0 `proofs`, one kind only. */
  private proofsOf(b: CredentialBody, format: 'dc+sd-jwt' | 'mso_mdoc'): { type: 'jwt' | 'cwt'; value: string }[] {
    if (b.proof && b.proofs) throw invalidProof('send proof or proofs, not both');
    let out: { type: 'jwt' | 'cwt'; value: string }[];
    if (b.proof) {
      const p = b.proof;
      if (p.jwt !== undefined && p.cwt !== undefined) throw invalidProof('a proof holds exactly one of jwt or cwt');
      if (p.proof_type === undefined) throw invalidProof('proof_type is required');
      if (p.proof_type !== 'jwt' && p.proof_type !== 'cwt') throw new AppError(400, 'unsupported_proof_type', `proof_type ${p.proof_type} is not supported`);
      const value = p.proof_type === 'jwt' ? p.jwt : p.cwt;
      if (typeof value !== 'string' || value === '') throw invalidProof(`proof_type ${p.proof_type} needs the ${p.proof_type} member`);
      out = [{ type: p.proof_type, value }];
    } else if (b.proofs) {
      const kinds = Object.keys(b.proofs).filter((k) => (b.proofs as Record<string, unknown>)[k] !== undefined);
      if (kinds.length !== 1) throw invalidProof('proofs holds exactly one proof type');
      const kind = kinds[0]!;
      if (kind !== 'jwt' && kind !== 'cwt') throw new AppError(400, 'unsupported_proof_type', `proof type ${kind} is not supported`);
      const list = (b.proofs as Record<string, unknown>)[kind];
      if (!Array.isArray(list) || list.length === 0 || list.some((x) => typeof x !== 'string'))
        throw invalidProof(`proofs.${kind} must be a non-empty array of strings`);
      if (list.length > 5) throw invalidProof('at most 5 proofs (batch_size)');
      out = (list as string[]).map((value) => ({ type: kind, value }));
    } else {
      throw invalidProof('a proof of possession of the holder key is required');
    }
    if (format === 'mso_mdoc' && out.some((p) => p.type === 'cwt')) throw new AppError(400, 'unsupported_proof_type', 'mso_mdoc takes jwt proofs only');
    return out;
  }

  // ---- Token Status List and revocation ---------------------------------------------------------

  readonly #statusBlocks = new Map<string, { next: number; end: number; size: number; at: number }>();

  /**
   * The next status list position. Positions are reserved from the database in blocks (one
   * committed write per block, not per credential); a block left unused at a restart is skipped,
   * never reused. A block starts at 64 positions; one used up within a second is followed by one
   * twice its size, up to 4096, so a burst of issuance commits a reservation every few thousand
   * credentials rather than every 64 (each such commit cost about a tenth of a signature per
   * credential), while a quiet appliance still skips at most 63 positions when it stops.
   */
  private reserveStatus(tenant: Tenant): { listId: number; idx: number } {
    let b = this.#statusBlocks.get(tenant.id);
    if (!b || b.next >= b.end) {
      const at = performance.now();
      const size = b && at - b.at < 1000 ? Math.min(b.size * 2, STATUS_BLOCK_MAX) : STATUS_BLOCK;
      const first = this.repo.reserveStatusIndices(tenant, size);
      b = { next: first, end: first + size, size, at };
      this.#statusBlocks.set(tenant.id, b);
    }
    const n = b.next++;
    return { listId: Math.floor(n / this.d.config.statusListSize) + 1, idx: n % this.d.config.statusListSize };
  }

  /** The signed Status List Token of list `listId` (cached per tenant and list until revocation or its ttl). */
  async statusList(tenant: Tenant, origin: string, listId: number): Promise<string> {
    this.flushCredentials();
    const uri = endpoints(origin).statusList(listId);
    const cacheKey = `${tenant.id}|${uri}`;
    const hit = this.#statusCache.get(cacheKey);
    const revoked = this.repo.revokedCount(tenant, listId);
    if (hit && hit.until > this.d.clock.now() && hit.revoked === revoked) return hit.jwt;
    const key = await this.keys.active(tenant);
    const jwt = await statusListToken({
      signer: key.signer,
      kid: key.kid,
      x5c: [key.certDer.toString('base64')],
      uri,
      size: this.d.config.statusListSize,
      revoked: this.repo.revokedIndices(tenant, listId),
      iat: this.nowSec(),
      ttl: this.d.config.statusListTtlSec,
    });
    this.#statusCache.set(cacheKey, { jwt, revoked, until: this.d.clock.now() + 1000 * Math.min(60, this.d.config.statusListTtlSec) });
    return jwt;
  }

  /** The status of one entry: 0 VALID, 1 INVALID (revoked); undefined when no credential has it. */
  status(tenant: Tenant, listId: number, idx: number): 0 | 1 | undefined {
    this.flushCredentials();
    const r = this.d.db.prepare('SELECT revoked_at FROM wi_credential WHERE tenant_id = ? AND list_id = ? AND idx = ?').get(tenant.id, listId, idx) as
      { revoked_at: string | null } | undefined;
    if (!r) return undefined;
    return r.revoked_at ? 1 : 0;
  }

  revoke(tenant: Tenant, by: { credentialId?: string; offerId?: string }, who: string): string[] {
    this.flushCredentials();
    if (by.credentialId !== undefined && !this.repo.credential(tenant, by.credentialId)) throw new NotFoundError(`no credential ${by.credentialId}`);
    if (by.offerId !== undefined && !this.repo.offer(tenant, by.offerId)) throw new NotFoundError(`no offer ${by.offerId}`);
    // The next status list fetch sees the new revoked count and rebuilds the list.
    return this.repo.revoke(tenant, by, new Date(this.d.clock.now()).toISOString(), who);
  }

  credentials(tenant: Tenant, opts: { offerId?: string; limit: number; offset: number }): { items: CredentialRow[]; total: number } {
    this.flushCredentials();
    return this.repo.credentials(tenant, opts);
  }

  prune(): void {
    this.repo.prune(this.nowSec());
  }

  close(): void {
    this.flushCredentials();
    this.keys.close();
  }
}

type PendingRow = [Tenant, Omit<CredentialRow, 'tenant_id' | 'revoked_at' | 'revoked_by'>];

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

function randomDigits(n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += String(crypto.randomInt(10));
  return s;
}
