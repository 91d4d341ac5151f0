import type { Tenant } from '../../server/sdk.ts';
import { Authorization } from './authorize.ts';
import { CredentialEndpoint } from './credential.ts';
import { IssuerKeys } from './keys.ts';
import { authorizationServerMetadata, issuerMetadata } from './metadata.ts';
import { Offers } from './offers.ts';
import type { IssuerBase, IssuerDeps } from './part.ts';
import type { ProvenKey } from './proof.ts';
import { IssuerRepo } from './repo.ts';
import { CredentialRowWriter } from './row-writer.ts';
import type { ConfigId, IssuerConfig, SubjectClaims } from './schemas.ts';
import { StatusLists } from './status-lists.ts';
import { TokenEndpoint } from './token.ts';
import { WalletClients } from './wallet-clients.ts';

export type { IssuerDeps } from './part.ts';
export { offerAuditExtra } from './offers.ts';
export { SIGN_IN_CLIENT_ID, SIGN_IN_COOKIE, SIGN_IN_PATH, type SignInRequest } from './authorize.ts';

/**
 * The wallet issuer (OpenID4VCI 1.0 and the seed's shapes), composed of one part per concern:
 * offers (offers.ts), the token endpoint and nonces (token.ts), PAR and the authorization
 * endpoint with its sign-in (authorize.ts), the credential endpoint (credential.ts), the batched
 * credential row writer (row-writer.ts), the Token Status List and revocation (status-lists.ts).
 * No HTTP in here; routes.ts maps requests onto it.
 */
export class IssuerService {
  readonly repo: IssuerRepo;
  readonly keys: IssuerKeys;
  readonly clients: WalletClients;
  readonly offers: Offers;
  readonly tokens: TokenEndpoint;
  readonly authorization: Authorization;
  readonly rows: CredentialRowWriter;
  readonly statusLists: StatusLists;
  readonly credentialEndpoint: CredentialEndpoint;

  constructor(private readonly d: IssuerDeps) {
    this.repo = new IssuerRepo(d.db);
    this.keys = new IssuerKeys(d.db, d.keys, d.clock, d.config, d.log);
    this.clients = new WalletClients(d.paths, d.clock, d.config.defaultWalletClientId, d.log);
    const base: IssuerBase = { d, repo: this.repo, keys: this.keys, clients: this.clients };
    this.offers = new Offers(base);
    this.tokens = new TokenEndpoint(base);
    this.authorization = new Authorization(base);
    this.rows = new CredentialRowWriter(base);
    this.statusLists = new StatusLists(base, this.rows);
    this.credentialEndpoint = new CredentialEndpoint(base, this.statusLists, this.rows);
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

  // ---- the parts, as routes, the CLI, the OIDC grant and the benchmark call them ---------------

  createOffer = (...a: Parameters<Offers['createOffer']>) => this.offers.createOffer(...a);
  offerObject = (...a: Parameters<Offers['offerObject']>) => this.offers.offerObject(...a);
  offerUri = (...a: Parameters<Offers['offerUri']>) => this.offers.offerUri(...a);
  offerAlive = (...a: Parameters<Offers['offerAlive']>) => this.offers.offerAlive(...a);

  token = (...a: Parameters<TokenEndpoint['token']>) => this.tokens.token(...a);
  preAuthorizedGrant = (...a: Parameters<TokenEndpoint['preAuthorizedGrant']>) => this.tokens.preAuthorizedGrant(...a);
  authorizationCodeGrant = (...a: Parameters<TokenEndpoint['authorizationCodeGrant']>) => this.tokens.authorizationCodeGrant(...a);
  newNonce = (...a: Parameters<TokenEndpoint['newNonce']>) => this.tokens.newNonce(...a);
  accessToken = (...a: Parameters<TokenEndpoint['accessToken']>) => this.tokens.accessToken(...a);

  par = (...a: Parameters<Authorization['par']>) => this.authorization.par(...a);
  authorize = (...a: Parameters<Authorization['authorize']>) => this.authorization.authorize(...a);
  signedIn = (...a: Parameters<Authorization['signedIn']>) => this.authorization.signedIn(...a);

  credential = (...a: Parameters<CredentialEndpoint['credential']>) => this.credentialEndpoint.credential(...a);

  /** Issues one credential of `configId` for `holder` (also the benchmark's entry). */
  issue(tenant: Tenant, origin: string, offerId: string, configId: ConfigId, claims: SubjectClaims, holder: ProvenKey): Promise<string> {
    return this.credentialEndpoint.issue(tenant, origin, offerId, configId, claims, holder);
  }

  committed = () => this.rows.committed();
  flushCredentials = () => this.rows.flushCredentials();

  statusList = (...a: Parameters<StatusLists['statusList']>) => this.statusLists.statusList(...a);
  status = (...a: Parameters<StatusLists['status']>) => this.statusLists.status(...a);
  revoke = (...a: Parameters<StatusLists['revoke']>) => this.statusLists.revoke(...a);
  credentials = (...a: Parameters<StatusLists['credentials']>) => this.statusLists.credentials(...a);

  prune(): void {
    this.repo.prune(this.nowSec());
  }

  close(): void {
    this.rows.flushCredentials();
    this.keys.close();
  }
}
