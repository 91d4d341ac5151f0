import { AppError, sha256Hex, type Tenant } from '../../server/sdk.ts';
import type * as MdocModule from './mdoc.ts';
import type * as SdJwtModule from './sdjwt.ts';
import { endpoints } from './metadata.ts';
import { FORMAT_OF } from './offers.ts';
import { IssuerPart, type IssuerBase } from './part.ts';
import type * as CwtModule from './proof-cwt.ts';
import { invalidProof, verifyJwtProof, type ProvenKey } from './proof.ts';
import { randomBase64url } from './random.ts';
import type { OfferRow, TokenRow } from './repo.ts';
import type { CredentialRowWriter } from './row-writer.ts';
import {
  CONFIG_IDS,
  MDOC_CONFIG_ID,
  PID_DOCTYPE,
  PID_VCT,
  SD_JWT_CONFIG_ID,
  subjectClaims,
  type ConfigId,
  type CredentialBody,
  type SubjectClaims,
} from './schemas.ts';
import type { StatusLists } from './status-lists.ts';
import { freshNonce } from './token.ts';

// The credential formats' libraries load on first issuance (start-up time), once: a repeated
// dynamic import still walks the module loader on every call.
let sdJwtModule: Promise<typeof SdJwtModule> | undefined;
let mdocModule: Promise<typeof MdocModule> | undefined;
/** The `cwt` proof type's module (cbor-x), on the first such proof. */
let cwtModule: Promise<typeof CwtModule> | undefined;
// Once loaded, used directly: an await of the settled import is still a promise turn per credential.
let sdJwtLoaded: typeof SdJwtModule | undefined;
let mdocLoaded: typeof MdocModule | undefined;

/** The credential endpoint (OpenID4VCI 1.0 §8): proofs checked, one credential per proof, each row recorded before it leaves. */
export class CredentialEndpoint extends IssuerPart {
  constructor(
    base: IssuerBase,
    private readonly statusLists: StatusLists,
    private readonly rows: CredentialRowWriter,
  ) {
    super(base);
  }

  #spend: ((t: Tenant, nonceHash: string, row: TokenRow, n: number, at: number, nextHash: string) => OfferRow | 'nonce' | 'offer' | 'spent') | undefined;

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
    for (const p of proofs)
      keys.push(
        p.type === 'jwt' ? await verifyJwtProof(p.value, aud, now) : (await (cwtModule ??= import('./proof-cwt.ts'))).verifyCwtProof(p.value, aud, now),
      );
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
    const next = freshNonce();
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
    await this.rows.committed();
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
    const { listId, idx } = this.statusLists.reserveStatus(tenant);
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
    this.rows.queueCredential(tenant, {
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
}
