import type { Statement } from 'better-sqlite3';
import type { DB } from './db.ts';

/**
 * SQLite's `PRAGMA data_version` (https://sqlite.org/pragma.html#pragma_data_version) of one
 * connection, read at most once per turn of the event loop and shared by every cache of that
 * connection that must notice another connection's commits (the CLI's, while the server runs):
 * the tenant cache and the OIDC client cache. Each read is a read transaction on the WAL (a few
 * µs); two caches each reading on their own cost the token endpoint two of them per turn.
 *
 * Exact for requests: they are read in I/O callbacks, which a turn's poll phase runs after epoll
 * returned them, so after their client sent them; a change committed before a request was sent
 * (the CLI returned, then the client asked) is seen by that request. The turn's mark is cleared
 * in its check phase (setImmediate). Code that runs outside requests and must see a commit of
 * another connection made within the same turn reads `fresh()`.
 */
export class DataVersion {
  readonly #stmt: Statement;
  #value = -1;
  #readThisTurn = false;

  constructor(db: DB) {
    this.#stmt = db.prepare('PRAGMA data_version').pluck();
  }

  /** The version as of this turn of the event loop (read at its first call in the turn). */
  current(): number {
    if (this.#readThisTurn) return this.#value;
    this.#readThisTurn = true;
    setImmediate(this.#newTurn).unref();
    return (this.#value = this.#stmt.get() as number);
  }

  /** The version now, whatever was read before in this turn. */
  fresh(): number {
    return (this.#value = this.#stmt.get() as number);
  }

  readonly #newTurn = (): void => {
    this.#readThisTurn = false;
  };
}

const shared = new WeakMap<DB, DataVersion>();

/** The one DataVersion of a connection (the tenant and client caches share its read). */
export function dataVersionOf(db: DB): DataVersion {
  let v = shared.get(db);
  if (!v) {
    v = new DataVersion(db);
    shared.set(db, v);
  }
  return v;
}
