import type { AuditWriter, Clock, DB, KeyService, Logger, Paths, UserService } from '../../server/sdk.ts';
import type { OidcService } from '../oidc/api.ts';
import type { IssuerKeys } from './keys.ts';
import type { IssuerRepo } from './repo.ts';
import type { IssuerConfig } from './schemas.ts';
import type { WalletClients } from './wallet-clients.ts';

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

/** What every part of the issuer stands on: the plugin's deps, its repository, its keys, the wallet clients. */
export interface IssuerBase {
  d: IssuerDeps;
  repo: IssuerRepo;
  keys: IssuerKeys;
  clients: WalletClients;
}

/** One concern of the issuer (offers, token, authorize, credential, rows, status lists) over the shared base. */
export abstract class IssuerPart {
  protected readonly d: IssuerDeps;
  protected readonly repo: IssuerRepo;
  protected readonly keys: IssuerKeys;
  protected readonly clients: WalletClients;

  constructor(base: IssuerBase) {
    this.d = base.d;
    this.repo = base.repo;
    this.keys = base.keys;
    this.clients = base.clients;
  }

  nowSec(): number {
    return Math.floor(this.d.clock.now() / 1000);
  }
}
