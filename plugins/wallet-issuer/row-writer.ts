import type { Tenant } from '../../server/sdk.ts';
import { IssuerPart } from './part.ts';
import type { CredentialRow } from './repo.ts';

const CREDENTIAL_ROWS_PER_INSERT = 32;

export type PendingRow = [Tenant, Omit<CredentialRow, 'tenant_id' | 'revoked_at' | 'revoked_by'>];

/** Credential rows, written in groups: one transaction per event-loop turn (queueCredential). */
export class CredentialRowWriter extends IssuerPart {
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
  queueCredential(tenant: Tenant, row: PendingRow[1]): void {
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
    // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- flushes now, then resolves; a failed write throws from here, as it always has
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
}
