import crypto from 'node:crypto';
import type * as jose from 'jose';
import { loadJose } from './jose.ts';
import {
  AppError,
  type AuditWriter,
  type Clock,
  type DB,
  type EventBus,
  InputError,
  type KeyService,
  MAX_JSON_DEPTH,
  nestsDeeperThan,
  NotFoundError,
  type Tenant,
  type UserService,
} from '../../server/sdk.ts';
import type { AnchorStore } from './anchors.ts';
import type { IdentityStore } from './identity.ts';
import type { Presets } from './presets.ts';
import type { VerifierConfig } from './schemas.ts';
import type * as MdocModule from './mdoc.ts';
import { verifySdJwtVc } from './sd-jwt.ts';
import type { StatusLists } from './status-list.ts';
import type { NetworkProfiles } from './network.ts';
import type { SsoAssertions } from './sso.ts';
import { CheckFailed } from './x509.ts';

/**
 * mdoc verification (./mdoc.ts with @owf/mdoc and cbor-x, ~110 ms of CPU and ~28 MB to load) is
 * loaded on the first mdoc presentation, not at every start: most appliances never see one.
 */
let mdocModule: Promise<typeof MdocModule> | undefined;

export type ResultStatus = 'completed' | 'verified' | 'error';

export interface VpResult {
  status: ResultStatus;
  session_id: string;
  presentation: Record<string, unknown>;
  error?: string;
  error_description?: string;
  check?: string;
  network_config?: Record<string, unknown>;
  sso_assertion?: string;
  /** OpenID4VP 1.0 §8.2 / §13.3: where the wallet sends its user's browser (login-page sessions). */
  redirect_uri?: string;
}

/** Where a login-page sign-in stands when the wallet's redirect reaches a browser. */
export type ReturnOutcome = { signIn: { userId: string; interaction: string | null } } | { elsewhere: true };

interface SessionRow {
  tenant_id: string;
  id: string;
  preset: string;
  client_id: string;
  scope: string;
  network_profile: string | null;
  nonce: string;
  state: string;
  response_mode: string;
  sealed_enc_key: string | null;
  enc_jwk_thumb: string | null;
  status: 'pending' | 'requested' | 'verified' | 'error';
  request_fetched: number;
  result: string | null;
  login_secret_hash: string | null;
  login_interaction: string | null;
  login_user_id: string | null;
  completed_at: string | null;
  result_key_hash: string | null;
  refused_responses: number;
  last_refused_check: string | null;
  login_browser_hash: string | null;
  login_code_hash: string | null;
  login_reviewed_at: string | null;
  created_at: string;
  expires_at: string;
}

/** Who is asking, for the audit trail. */
export interface Caller {
  ip: string;
  ua: string;
}

/** HAIP: encrypted responses with ECDH-ES on P-256 and AES-GCM content encryption. */
export const ENC_VALUES = ['A128GCM', 'A256GCM'];
export const VP_FORMATS = {
  'dc+sd-jwt': { 'sd-jwt_alg_values': ['ES256', 'ES384', 'ES512'], 'kb-jwt_alg_values': ['ES256', 'ES384', 'ES512'] },
  mso_mdoc: { issuerauth_alg_values: [-7, -35, -36], deviceauth_alg_values: [-7, -35, -36] },
};

const random = (n = 16) => crypto.randomBytes(n).toString('base64url');
const aadEnc = (t: Tenant, id: string) => `wallet-verifier:enc:${t.id}:${id}`;
const aadResult = (t: Tenant, id: string) => `wallet-verifier:result:${t.id}:${id}`;
const SD_JWT_RE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*~/;

/** The verifier's sessions (no HTTP here): start, the signed request, and the response. */
export class VerifierService {
  constructor(
    private readonly deps: {
      db: DB;
      keys: KeyService;
      clock: Clock;
      audit: AuditWriter;
      events: EventBus;
      identity: IdentityStore;
      anchors: AnchorStore;
      presets: Presets;
      statusLists: StatusLists;
      network: NetworkProfiles;
      sso: SsoAssertions;
      users: UserService;
      config: VerifierConfig;
    },
  ) {}

  /** One verifier event: into the appliance audit log and the verifier's own trail (list-vp-events). */
  private record(tenant: Tenant, event: string, sessionId: string, who: Caller, extra: Record<string, string | number | boolean>): void {
    const full = { session: sessionId, ...extra };
    this.deps.audit.write(tenant, { event, ip: who.ip, ua: who.ua, extra: full });
    this.deps.db.prepare('INSERT INTO vp_event (tenant_id, ts, event, session_id, ip, ua, extra) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      tenant.id,
      new Date(this.now()).toISOString(),
      event,
      sessionId,
      who.ip,
      who.ua,
      Object.entries(full)
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- the values come from a parsed form that only claims to be strings
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(' '),
    );
  }

  /** GET ?list-vp-events: newest first. */
  events(tenant: Tenant, q: { limit: number; since?: string }) {
    const rows = this.deps.db
      .prepare('SELECT ts, event, ip, ua, extra FROM vp_event WHERE tenant_id = ? AND ts >= ? ORDER BY seq DESC LIMIT ?')
      .all(tenant.id, q.since ? new Date(q.since).toISOString() : '', q.limit) as { ts: string; event: string; ip: string; ua: string; extra: string }[];
    return rows.map((r) => ({ ts: r.ts, event: r.event, tenant: tenant.host, user: '', ip: r.ip, ua: r.ua, extra: r.extra }));
  }

  private now(): number {
    return this.deps.clock.now();
  }

  async start(
    tenant: Tenant,
    origin: string,
    q: {
      preset: string;
      client_id_prefix: 'x509_hash' | 'x509_san_dns';
      scope: string;
      network_profile?: string;
      response_mode: 'direct_post.jwt' | 'direct_post';
    },
    who: Caller,
  ) {
    const preset = this.deps.presets.get(q.preset);
    const scopes = [...new Set(q.scope.split(' ').filter(Boolean))];
    const unknown = scopes.filter((s) => s !== 'openid' && s !== 'network_access');
    if (!scopes.includes('openid') || unknown.length) throw new InputError('scope must be `openid` or `openid network_access`', 'invalid_scope');
    if (scopes.includes('network_access')) {
      if (!q.network_profile) throw new InputError('network_access needs network_profile', 'invalid_request');
      if (!this.deps.network.get(tenant, q.network_profile)) throw new InputError(`unknown network profile ${q.network_profile}`, 'invalid_request');
    }
    const id = await this.deps.identity.get(tenant);
    const clientId = q.client_id_prefix === 'x509_san_dns' ? id.sanDnsClientId : id.x509HashClientId;
    const sessionId = random();
    // The session id travels in the QR code; the result key only in this answer (see result()).
    const resultKey = random(32);
    const created = this.now();
    const expires = created + this.deps.config.sessionTtlSeconds * 1000;
    this.deps.db
      .prepare(
        `INSERT INTO vp_session (tenant_id, id, preset, client_id, scope, network_profile, nonce, state, response_mode, status, created_at, expires_at, result_key_hash)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
      )
      .run(
        tenant.id,
        sessionId,
        preset.name,
        clientId,
        scopes.join(' '),
        q.network_profile ?? null,
        random(24),
        random(),
        q.response_mode,
        new Date(created).toISOString(),
        new Date(expires).toISOString(),
        sha256(resultKey),
      );
    const requestUri = `${origin}/oidc.ashx?action=vp-request&session_id=${sessionId}`;
    // OpenID4VP 1.0 §5.7 / RFC 9101 §5.2: by reference; the client_id repeats the signed one.
    const url = `openid4vp://?client_id=${encodeURIComponent(clientId)}&request_uri=${encodeURIComponent(requestUri)}`;
    this.record(tenant, 'vp-start', sessionId, who, { preset: preset.name, client_id_prefix: q.client_id_prefix, scope: scopes.join(' ') });
    return {
      session_id: sessionId,
      request_uri: requestUri,
      openid4vp_url: url,
      expires_in: this.deps.config.sessionTtlSeconds,
      client_id: clientId,
      qr_page: `${origin}/oidc.ashx/vp-qr?session_id=${sessionId}`,
      result_key: resultKey,
    };
  }

  private session(tenant: Tenant, id: string): SessionRow | undefined {
    return this.deps.db.prepare('SELECT * FROM vp_session WHERE tenant_id = ? AND id = ?').get(tenant.id, id) as SessionRow | undefined;
  }

  /** A session the wallet may still act on: known, not expired. */
  private live(tenant: Tenant, id: string): SessionRow {
    const s = this.session(tenant, id);
    if (!s) throw new NotFoundError('unknown presentation session');
    if (Date.parse(s.expires_at) <= this.now()) throw new AppError(400, 'session_expired', 'the presentation session has expired');
    return s;
  }

  openid4vpUrl(tenant: Tenant, origin: string, sessionId: string): string {
    const s = this.live(tenant, sessionId);
    const requestUri = `${origin}/oidc.ashx?action=vp-request&session_id=${s.id}`;
    return `openid4vp://?client_id=${encodeURIComponent(s.client_id)}&request_uri=${encodeURIComponent(requestUri)}`;
  }

  /**
   * The signed request object (OpenID4VP 1.0 §5, HAIP §5), as often as it is asked for while the
   * session waits: the session id is in the QR code, so a fetch by someone who saw it must not lock
   * the wallet out. Every answer carries the same nonce, state and encryption key (made on the
   * first fetch); what binds a response to the person is the login page's binding, not secrecy of
   * the request.
   */
  async request(tenant: Tenant, origin: string, sessionId: string, who: Caller): Promise<string> {
    const s = this.live(tenant, sessionId);
    if (s.status === 'verified' || s.status === 'error') throw new AppError(400, 'session_finished', 'this presentation session is already finished');
    this.deps.db
      .prepare(
        `UPDATE vp_session SET request_fetched = request_fetched + 1, status = 'requested' WHERE tenant_id = ? AND id = ? AND status IN ('pending', 'requested')`,
      )
      .run(tenant.id, s.id);
    const id = await this.deps.identity.get(tenant);
    const preset = this.deps.presets.get(s.preset);
    const clientMetadata: Record<string, unknown> = { vp_formats_supported: VP_FORMATS };
    if (s.response_mode === 'direct_post.jwt') {
      clientMetadata.jwks = { keys: [await this.encryptionKey(tenant, s)] };
      clientMetadata.encrypted_response_enc_values_supported = ENC_VALUES;
    }
    const nowS = Math.floor(this.now() / 1000);
    const J = await loadJose();
    const jwt = await new J.SignJWT({
      response_type: 'vp_token',
      client_id: s.client_id,
      response_uri: this.responseUri(origin, s.id),
      response_mode: s.response_mode,
      nonce: s.nonce,
      state: s.state,
      dcql_query: preset.dcql,
      client_metadata: clientMetadata,
      aud: 'https://self-issued.me/v2',
      iat: nowS,
      exp: Math.floor(Date.parse(s.expires_at) / 1000),
    })
      .setProtectedHeader({ alg: 'ES256', typ: 'oauth-authz-req+jwt', x5c: id.x5c.map((d) => d.toString('base64')) })
      .sign(id.key);
    this.record(tenant, 'vp-request', s.id, who, { client_id: s.client_id });
    return jwt;
  }

  /**
   * The session's ECDH-ES public key: made on the first fetch of the request object (the first
   * writer wins when two fetch at once), the same one on every later fetch; kid = its thumbprint.
   */
  private async encryptionKey(tenant: Tenant, s: SessionRow): Promise<jose.JWK> {
    if (!s.sealed_enc_key) {
      const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const thumb = await (await loadJose()).calculateJwkThumbprint(privateKey.export({ format: 'jwk' }) as jose.JWK, 'sha256');
      this.deps.db
        .prepare('UPDATE vp_session SET sealed_enc_key = ?, enc_jwk_thumb = ? WHERE tenant_id = ? AND id = ? AND sealed_enc_key IS NULL')
        .run(this.deps.keys.seal(privateKey.export({ format: 'der', type: 'pkcs8' }), aadEnc(tenant, s.id)), thumb, tenant.id, s.id);
      s = this.session(tenant, s.id)!;
    }
    const priv = crypto.createPrivateKey({ key: this.deps.keys.open(s.sealed_enc_key!, aadEnc(tenant, s.id)), format: 'der', type: 'pkcs8' });
    const pub = crypto.createPublicKey(priv).export({ format: 'jwk' }) as jose.JWK;
    return { kty: pub.kty, crv: pub.crv, x: pub.x, y: pub.y, use: 'enc', alg: 'ECDH-ES', kid: s.enc_jwk_thumb! };
  }

  responseUri(origin: string, sessionId: string): string {
    return `${origin}/oidc.ashx?action=vp-response&session_id=${sessionId}`;
  }

  /**
   * The wallet's answer, in any of the shapes real wallets and the seed send: a form with
   * `response=<JWE>` (1.0 direct_post.jwt), a form with `vp_token` and `state` (direct_post), an
   * `application/jose` body (the JWE itself), or a raw CBOR DeviceResponse.
   */
  async respond(tenant: Tenant, origin: string, sessionId: string | undefined, body: Buffer, contentType: string, who: Caller): Promise<VpResult> {
    const mt = contentType.split(';')[0]!.trim().toLowerCase();
    let form: URLSearchParams | undefined;
    let jwe: string | undefined;
    let raw: Buffer | undefined;
    if (mt === 'application/x-www-form-urlencoded') {
      form = new URLSearchParams(body.toString('utf8'));
      jwe = form.get('response') ?? undefined;
    } else if (mt === 'application/jose' || mt === 'application/jwt') jwe = body.toString('utf8').trim();
    else if (body.length && body[0]! >= 0xa0 && body[0]! <= 0xbb) raw = body;
    else throw new InputError('vp-response: expected a form, an application/jose body or a CBOR DeviceResponse', 'invalid_request');
    const sid = sessionId ?? form?.get('session_id') ?? undefined;
    if (!sid) throw new InputError('vp-response: session_id is missing', 'invalid_request');
    const s = this.live(tenant, sid);
    this.record(tenant, 'vp-response-arrived', s.id, who, { shape: jwe ? 'jwe' : raw ? 'cbor' : 'form' });
    if (s.status === 'verified' || s.status === 'error') throw new AppError(400, 'session_finished', 'this presentation session is already finished');

    let payload: Record<string, unknown>;
    if (jwe) payload = await this.decrypt(tenant, s, jwe);
    else if (form) {
      if (s.response_mode === 'direct_post.jwt')
        throw this.fail(tenant, s, 'response_mode', 'this session expects an encrypted response (direct_post.jwt)', who);
      payload = Object.fromEntries(form.entries());
      if (typeof payload.vp_token === 'string' && /^[[{]/.test(payload.vp_token)) {
        try {
          payload.vp_token = JSON.parse(payload.vp_token) as unknown;
        } catch {
          throw new InputError('vp_token: not JSON', 'invalid_request');
        }
      }
    } else payload = { vp_token: raw!.toString('base64url'), state: s.state };
    // The bound every JSON request body has (a form field or a JWE carries JSON past it): the
    // presentation is looked for by walking vp_token, which 20,000 nested brackets would overflow.
    if (nestsDeeperThan(payload, MAX_JSON_DEPTH)) throw new InputError(`vp_token: JSON nested deeper than ${MAX_JSON_DEPTH} levels`, 'invalid_request');

    // OpenID4VP 1.0 §8.2: state ties the answer to this session (a raw CBOR body has none to carry).
    if (!raw && (typeof payload.state !== 'string' || !safeEq(payload.state, s.state)))
      throw this.fail(tenant, s, 'state', 'state does not match the session', who);
    const token = firstPresentation(payload.vp_token);
    if (!token) throw this.fail(tenant, s, 'vp_token', 'vp_token is missing or empty', who);

    // A presentation is accepted once, anywhere in the tenant: a replay into another session is refused.
    const hash = crypto.createHash('sha256').update(token).digest('hex');
    const fresh = this.deps.db
      .prepare('INSERT OR IGNORE INTO vp_seen_token (tenant_id, hash, seen_at) VALUES (?, ?, ?)')
      .run(tenant.id, hash, new Date(this.now()).toISOString()).changes;
    if (!fresh) throw this.fail(tenant, s, 'replay', 'this presentation was already submitted', who, 'replayed_presentation');

    const preset = this.deps.presets.get(s.preset);
    const anchors = this.deps.anchors.anchors(tenant);
    let presentation: Record<string, unknown>;
    try {
      if (SD_JWT_RE.test(token)) {
        const v = await verifySdJwtVc(token, {
          vctValues: preset.vctValues,
          audience: s.client_id,
          nonce: s.nonce,
          now: this.now(),
          iatWindowSeconds: this.deps.config.iatWindowSeconds,
          anchors,
          status: (ref) => this.deps.statusLists.status(tenant, anchors, ref),
        });
        presentation = { format: 'dc+sd-jwt', vct: v.vct, issuer: v.issuer, claims: v.claims, ...(v.statusUnknown ? { credential_status: 'unknown' } : {}) };
      } else {
        const bytes = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, 'base64url') : Buffer.alloc(0);
        if (!bytes.length || bytes[0]! < 0xa0 || bytes[0]! > 0xbb)
          throw new CheckFailed('format', 'vp_token is neither an SD-JWT VC nor a CBOR DeviceResponse');
        if (!anchors.length) {
          throw new AppError(501, 'mdoc_verify_not_configured', 'no issuer trust anchors (IACA) are configured for mdoc verification');
        }
        const { verifyMdoc } = await (mdocModule ??= import('./mdoc.ts'));
        const v = await verifyMdoc(bytes, {
          doctypes: preset.doctypes,
          clientId: s.client_id,
          nonce: s.nonce,
          responseUri: this.responseUri(origin, s.id),
          // OpenID4VP 1.0 §B.2.6.1: the thumbprint of the key the response was encrypted to, null when it was not encrypted.
          jwkThumbprint: jwe && s.enc_jwk_thumb ? new Uint8Array(Buffer.from(s.enc_jwk_thumb, 'base64url')) : null,
          now: this.now(),
          anchors,
        });
        presentation = { format: 'mso_mdoc', doctype: v.docType, issuer: v.issuer, claims: v.claims, namespaces: v.namespaces };
      }
    } catch (e) {
      if (e instanceof CheckFailed) throw this.fail(tenant, s, e.check, e.message, who);
      if (e instanceof AppError && e.status === 501) {
        // The session stays open: an operator may add an anchor and the wallet may retry.
        this.deps.db.prepare('DELETE FROM vp_seen_token WHERE tenant_id = ? AND hash = ?').run(tenant.id, hash);
      }
      throw e;
    }
    const result: VpResult = { status: 'verified', session_id: s.id, presentation };
    // Outbox: the finished session and its webhook event are one transaction. Only the first
    // verified presentation finishes a session; one racing it is told the session is finished.
    this.deps.db.transaction(() => {
      if (!this.finish(tenant, s, 'verified', result)) throw new AppError(400, 'session_finished', 'this presentation session is already finished');
      this.deps.events.emit(tenant.id, 'presentation.verified', {
        sessionId: s.id,
        preset: s.preset,
        format: String(presentation.format),
        clientId: s.client_id,
        claimNames: Object.keys((presentation.claims as Record<string, unknown> | undefined) ?? {}).sort(),
      });
    })();
    this.record(tenant, 'vp-verify-result', s.id, who, { status: 'verified', format: String(presentation.format) });
    // The stored result never holds the network credential: it is sealed in its own row.
    let networkConfig: Record<string, unknown> | undefined;
    if (s.scope.split(' ').includes('network_access') && s.network_profile) {
      const id = await this.deps.identity.get(tenant);
      networkConfig = await this.deps.network.issue(tenant, s.id, s.network_profile, (presentation.claims as Record<string, unknown>) ?? {}, id);
    }
    // Wallet sign-in: an assertion only when the tenant's policy maps this PID to an account. A
    // session the login page started signs that browser in instead (completeLogin, returnLogin):
    // the wallet gets no assertion but a redirect_uri with a response_code for its user's browser.
    let ssoAssertion: string | undefined;
    let redirectUri: string | undefined;
    const claims = (presentation.claims as Record<string, unknown>) ?? {};
    const account = this.deps.sso.account(tenant, claims);
    if (s.login_secret_hash) {
      // OpenID4VP 1.0 §13.3: the response_code goes to whoever presented; only the browser holding
      // the session's cookie may redeem it (returnLogin), so a presentation posted from elsewhere
      // cannot sign that browser in.
      const code = random(32);
      const userId = 'user' in account ? account.user.id : null;
      this.deps.db
        .prepare('UPDATE vp_session SET login_user_id = ?, login_code_hash = ? WHERE tenant_id = ? AND id = ?')
        .run(userId, sha256(code), tenant.id, s.id);
      redirectUri = `${origin}/oidc.ashx/wallet-login/return?session_id=${encodeURIComponent(s.id)}&response_code=${code}`;
      if ('user' in account) this.record(tenant, 'vp-sso-minted', s.id, who, { user: account.user.name, via: 'login-page' });
    } else if ('user' in account) {
      ssoAssertion = this.deps.sso.mint(tenant, s.id, account.user, claims);
      this.record(tenant, 'vp-sso-minted', s.id, who, { user: account.user.name });
    }
    return {
      ...result,
      ...(networkConfig ? { network_config: networkConfig } : {}),
      ...(ssoAssertion ? { sso_assertion: ssoAssertion } : {}),
      ...(redirectUri ? { redirect_uri: redirectUri } : {}),
    };
  }

  private async decrypt(tenant: Tenant, s: SessionRow, jwe: string): Promise<Record<string, unknown>> {
    if (!s.sealed_enc_key) throw new InputError('this session has no encryption key (was the request object fetched?)', 'invalid_request');
    const key = crypto.createPrivateKey({ key: this.deps.keys.open(s.sealed_enc_key, aadEnc(tenant, s.id)), format: 'der', type: 'pkcs8' });
    try {
      const { plaintext } = await (
        await loadJose()
      ).compactDecrypt(jwe, key, { keyManagementAlgorithms: ['ECDH-ES'], contentEncryptionAlgorithms: ENC_VALUES });
      const v: unknown = JSON.parse(Buffer.from(plaintext).toString('utf8'));
      if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      /* below */
    }
    throw new InputError('the encrypted response does not decrypt with this session key', 'invalid_request');
  }

  /**
   * Finishes a waiting session (false when another response finished it first). The result is
   * stored sealed: it holds the PID claims the wallet disclosed (personal data at rest).
   */
  private finish(tenant: Tenant, s: SessionRow, status: 'verified' | 'error', result: VpResult): boolean {
    const changed = this.deps.db
      .prepare(`UPDATE vp_session SET status = ?, result = ?, sealed_enc_key = NULL WHERE tenant_id = ? AND id = ? AND status IN ('pending', 'requested')`)
      .run(status, this.deps.keys.seal(JSON.stringify(result), aadResult(tenant, s.id)), tenant.id, s.id).changes;
    return changed > 0;
  }

  private storedResult(tenant: Tenant, s: SessionRow & { result: string }): VpResult {
    // Rows finished before results were sealed hold plain JSON.
    const text = s.result.startsWith('{') ? s.result : this.deps.keys.openString(s.result, aadResult(tenant, s.id));
    return JSON.parse(text) as VpResult;
  }

  /**
   * A refused response (400 naming the check). It does not finish the session: anyone who saw the
   * QR code can post one, and the wallet must still be able to answer. It is counted, and the
   * `maxRefusedResponses`th ends the session with an error result saying so.
   */
  private fail(
    tenant: Tenant,
    s: SessionRow,
    check: string,
    description: string,
    who: Caller,
    code: 'invalid_presentation' | 'replayed_presentation' = 'invalid_presentation',
  ): AppError {
    const row = this.deps.db
      .prepare(
        `UPDATE vp_session SET refused_responses = refused_responses + 1, last_refused_check = ? WHERE tenant_id = ? AND id = ? AND status IN ('pending', 'requested') RETURNING refused_responses`,
      )
      .get(check, tenant.id, s.id) as { refused_responses: number } | undefined;
    this.record(tenant, 'vp-verify-result', s.id, who, { status: 'error', check });
    const limit = this.deps.config.maxRefusedResponses;
    if (row && row.refused_responses >= limit) {
      const last = `${check}: ${description}`;
      this.finish(tenant, s, 'error', {
        status: 'error',
        session_id: s.id,
        presentation: {},
        error: 'invalid_presentation',
        error_description: `too_many_responses: ${limit} responses to this session were refused (the last: ${last})`,
        check: 'too_many_responses',
      });
      this.record(tenant, 'vp-verify-result', s.id, who, { status: 'error', check: 'too_many_responses' });
    }
    return new AppError(400, code, `${check}: ${description}`, { extra: { status: 'error', session_id: s.id, presentation: {}, check } });
  }

  /**
   * The result so far. The session id is in the QR code, so whoever saw the screen has it: the
   * status (and a failed check's name) is for anyone holding the id, the disclosed claims only for
   * the holder of the session's `result_key` (returned by vp-start alone). A login-page session
   * never shows them here: its page signs in instead. A wrong key is refused, not ignored.
   */
  result(
    tenant: Tenant,
    sessionId: string,
    resultKey?: string,
  ): VpResult | { status: 'pending'; session_id: string; refused_responses?: number; check?: string } {
    const s = this.session(tenant, sessionId);
    if (!s) throw new NotFoundError('unknown presentation session');
    const entitled = resultKey !== undefined && !!s.result_key_hash && safeEq(sha256(resultKey), s.result_key_hash);
    if (resultKey !== undefined && !entitled) throw new AppError(403, 'access_denied', 'the result key does not belong to this session');
    if (s.result) {
      const r = this.storedResult(tenant, { ...s, result: s.result });
      // completed: verified, and what the session was started for has been taken up.
      const out = s.completed_at && r.status === 'verified' ? { ...r, status: 'completed' as const } : r;
      return entitled && !s.login_secret_hash ? out : { ...out, presentation: {} };
    }
    if (Date.parse(s.expires_at) <= this.now()) throw new AppError(400, 'session_expired', 'the presentation session has expired');
    // Refused responses leave the session waiting; the page may say that one was refused and why.
    return s.refused_responses
      ? { status: 'pending', session_id: s.id, refused_responses: s.refused_responses, check: s.last_refused_check ?? undefined }
      : { status: 'pending', session_id: s.id };
  }

  /**
   * `completed` (spec VpResponseResult.status): the presentation was verified AND the result was
   * taken up by the party the session was started for. Once only: false when it already was.
   */
  markCompleted(tenant: Tenant, sessionId: string, who: Caller, how: string): boolean {
    const done = this.deps.db
      .prepare(`UPDATE vp_session SET completed_at = ? WHERE tenant_id = ? AND id = ? AND status = 'verified' AND completed_at IS NULL`)
      .run(new Date(this.now()).toISOString(), tenant.id, sessionId).changes;
    if (done) this.record(tenant, 'vp-completed', sessionId, who, { via: how });
    return done > 0;
  }

  /**
   * The login page's wallet sign-in: a session bound to a secret only that page holds, and to a
   * second one for the browser's SameSite=Strict cookie (`browser_secret`, which the route sets and
   * never shows the page), which the wallet's redirect must bring back (returnLogin).
   */
  async startLogin(tenant: Tenant, origin: string, interaction: string, who: Caller) {
    const st = await this.start(
      tenant,
      origin,
      { preset: this.deps.config.signIn.preset, client_id_prefix: 'x509_hash', scope: 'openid', response_mode: 'direct_post.jwt' },
      who,
    );
    const secret = random(32);
    const browserSecret = random(32);
    this.deps.db
      .prepare('UPDATE vp_session SET login_secret_hash = ?, login_browser_hash = ?, login_interaction = ? WHERE tenant_id = ? AND id = ?')
      .run(sha256(secret), sha256(browserSecret), interaction || null, tenant.id, st.session_id);
    return {
      page: {
        session_id: st.session_id,
        openid4vp_url: st.openid4vp_url,
        qr_svg: `${origin}/oidc.ashx/vp-qr.svg?session_id=${st.session_id}`,
        login_secret: secret,
        expires_in: st.expires_in,
      },
      browserSecret,
    };
  }

  /** A login-page session, for the page holding its secret. */
  private loginSession(tenant: Tenant, sessionId: string, secret: string): SessionRow {
    const s = this.session(tenant, sessionId);
    if (!s || !s.login_secret_hash) throw new NotFoundError('unknown sign-in session');
    if (!safeEq(sha256(secret), s.login_secret_hash)) throw new AppError(403, 'access_denied', 'this sign-in session belongs to another page');
    if (s.status !== 'verified')
      throw new AppError(409, 'conflict', 'the wallet has not presented a verified PID in this session', { reason: 'pid_not_verified' });
    if (s.completed_at) throw new AppError(409, 'session_finished', 'this sign-in was already completed');
    if (!s.login_user_id) {
      throw new AppError(403, 'access_denied', 'no account of this tenant may sign in with this PID (tenant policy)', { reason: 'no_account' });
    }
    return s;
  }

  /**
   * Cross-device (OpenID4VP 1.0 §13): the page learns whose PID was presented and shows the name
   * for the person to confirm before it may complete. Whoever saw the QR code can present their own
   * PID into this session; the person in front of the page then sees a stranger's name.
   */
  reviewLogin(tenant: Tenant, sessionId: string, secret: string): { name: string; account: string } {
    const s = this.loginSession(tenant, sessionId, secret);
    const claims = (this.storedResult(tenant, { ...s, result: s.result! }).presentation.claims ?? {}) as Record<string, unknown>;
    const name = [claims.given_name, claims.family_name].filter((v): v is string => typeof v === 'string' && v !== '').join(' ');
    this.deps.db.prepare('UPDATE vp_session SET login_reviewed_at = ? WHERE tenant_id = ? AND id = ?').run(new Date(this.now()).toISOString(), tenant.id, s.id);
    return { name, account: this.deps.users.get(tenant, s.login_user_id!)?.name ?? '' };
  }

  /**
   * The login page, after the person confirmed the name reviewLogin showed: the account the PID
   * mapped to, once, for the page holding the secret. Errors: 404 unknown, 403 wrong secret, 409
   * not verified yet, not reviewed or already used, 403 `access_denied` when the tenant's policy
   * maps this PID to nobody.
   */
  completeLogin(tenant: Tenant, sessionId: string, secret: string, who: Caller): { userId: string; interaction: string | null } {
    const s = this.loginSession(tenant, sessionId, secret);
    if (!s.login_reviewed_at) {
      throw new AppError(409, 'conflict', 'the page must show the presented name for confirmation first (wallet-login/review)', {
        reason: 'login_not_reviewed',
      });
    }
    if (!this.markCompleted(tenant, s.id, who, 'login-page')) throw new AppError(409, 'session_finished', 'this sign-in was already completed');
    return { userId: s.login_user_id!, interaction: s.login_interaction };
  }

  /**
   * Same-device (OpenID4VP 1.0 §13.3): the wallet sends its user's browser to the redirect_uri of
   * its vp-response answer. The response_code is used once, whichever browser brings it; it signs
   * in only the browser whose cookie started the session. Without that cookie (the wallet's
   * browser on another device, or a navigation from another site, which a SameSite=Strict cookie
   * does not accompany) the sign-in is finished on the page that started it, by confirmation.
   */
  returnLogin(tenant: Tenant, sessionId: string, code: string, browserSecret: string | undefined, who: Caller): ReturnOutcome {
    const s = this.session(tenant, sessionId);
    if (!s || !s.login_secret_hash) throw new NotFoundError('unknown sign-in session');
    const used = this.deps.db
      .prepare('UPDATE vp_session SET login_code_hash = NULL WHERE tenant_id = ? AND id = ? AND login_code_hash = ?')
      .run(tenant.id, s.id, sha256(code)).changes;
    if (!used) throw new AppError(403, 'access_denied', 'this sign-in link is not valid (or was already used)', { reason: 'link_invalid' });
    if (!browserSecret || !s.login_browser_hash || !safeEq(sha256(browserSecret), s.login_browser_hash)) return { elsewhere: true };
    if (!s.login_user_id) {
      throw new AppError(403, 'access_denied', 'no account of this tenant may sign in with this PID (tenant policy)', { reason: 'no_account' });
    }
    if (!this.markCompleted(tenant, s.id, who, 'login-redirect')) throw new AppError(409, 'session_finished', 'this sign-in was already completed');
    return { signIn: { userId: s.login_user_id, interaction: s.login_interaction } };
  }

  /** /.well-known/eudiw-verifier-metadata: what a wallet or an operator needs to know about this verifier. */
  async metadata(tenant: Tenant, origin: string): Promise<Record<string, unknown>> {
    const id = await this.deps.identity.get(tenant);
    return {
      client_id: id.x509HashClientId,
      client_ids: [id.x509HashClientId, id.sanDnsClientId],
      client_id_prefixes_supported: ['x509_hash', 'x509_san_dns'],
      x5c: id.x5c.map((d) => d.toString('base64')),
      certificate_not_after: id.notAfter,
      trust_anchor_uri: `${origin}/rp-cert.ashx?ca`,
      request_object_signing_alg_values_supported: ['ES256'],
      response_modes_supported: ['direct_post.jwt', 'direct_post'],
      authorization_encryption_alg_values_supported: ['ECDH-ES'],
      encrypted_response_enc_values_supported: ENC_VALUES,
      vp_formats_supported: VP_FORMATS,
      presets: this.deps.presets.names(),
      vp_start_endpoint: `${origin}/oidc.ashx?action=vp-start`,
      response_uri_base: `${origin}/oidc.ashx?action=vp-response`,
    };
  }

  prune(): void {
    this.deps.db.prepare('DELETE FROM vp_session WHERE expires_at < ?').run(new Date(this.now() - 86_400_000).toISOString());
  }
}

/** OpenID4VP 1.0 §8.1: vp_token is an object of credential query id → array of presentations; drafts sent a string or an array. */
function firstPresentation(v: unknown): string | undefined {
  if (typeof v === 'string') return v || undefined;
  if (Array.isArray(v)) return firstPresentation(v[0]);
  if (v && typeof v === 'object') {
    for (const val of Object.values(v)) {
      const p = firstPresentation(val);
      if (p) return p;
    }
  }
  return undefined;
}

function sha256(v: string): string {
  return crypto.createHash('sha256').update(v).digest('hex');
}

function safeEq(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}
