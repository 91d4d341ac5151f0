import { type AuditInput, type AuditWriter, type Clock, InputError, type Tenant, type UserService } from '../../server/sdk.ts';
import { type AuditRepo, type AuditFilter, eventStyle } from './repo.ts';

const EVENT_RE = /^[a-z0-9][a-z0-9.-]{0,63}$/;
// Values that must never reach the log, whatever a caller passes in `extra`.
const SECRET_KEY_RE = /pass|secret|token|code|key|assertion|pin/i;

/** Renders `extra` as the spec's free-form key=value tail; secret-looking keys are dropped. */
export function formatExtra(extra: AuditInput['extra']): string {
  if (extra === undefined) return '';
  if (typeof extra === 'string') return extra.slice(0, 1000);
  return Object.entries(extra)
    .filter(([k, v]) => v !== undefined && !SECRET_KEY_RE.test(k))
    .map(([k, v]) => `${k}=${String(v ?? '').replace(/\s+/g, '_')}`)
    .join(' ')
    .slice(0, 1000);
}

/** How long an aggregated row takes repeats of its entry, from the first (AuditInput.aggregate). */
const AGGREGATE_MS = 60_000;
/** Open aggregated rows remembered at most; past it the stale ones go (a repeat then starts a new row). */
const AGGREGATE_KEYS = 10_000;

export class AuditService implements AuditWriter {
  /** Aggregated rows still taking repeats, by tenant, event, user, address and extra. */
  readonly #open = new Map<string, { id: number; since: number; count: number; extra: string }>();

  constructor(
    private readonly repo: AuditRepo,
    private readonly clock: Clock,
    /** The tenant's accounts, so the `user` filter also finds entries by an account's e-mail. */
    private readonly users?: Pick<UserService, 'list'>,
  ) {}

  write(tenant: Tenant, e: AuditInput): void {
    if (!EVENT_RE.test(e.event)) throw new Error(`invalid audit event name ${JSON.stringify(e.event)}`);
    const now = this.clock.now();
    const row = {
      ts: new Date(now).toISOString(),
      // One style for every name (the spec's `login-ok`, `trunk-save`): a dotted name from a
      // writer not yet renamed is stored with dashes, so filters and the console see one name.
      event: eventStyle(e.event),
      user: (e.user ?? '').slice(0, 320),
      ip: (e.ip ?? '').slice(0, 64),
      ua: (e.ua ?? '').slice(0, 512),
      extra: formatExtra(e.extra),
    };
    if (!e.aggregate) {
      this.repo.insert(tenant, row);
      return;
    }
    // The user agent is not part of the key: a guesser would vary it to get a row per attempt.
    const key = JSON.stringify([tenant.id, row.event, row.user, row.ip, row.extra]);
    const open = this.#open.get(key);
    if (open && now - open.since < AGGREGATE_MS && now >= open.since) {
      open.count++;
      if (this.repo.setExtra(tenant, open.id, `${open.extra ? `${open.extra} ` : ''}count=${open.count}`.slice(0, 1000))) return;
    }
    if (this.#open.size >= AGGREGATE_KEYS) {
      for (const [k, v] of this.#open) if (now - v.since >= AGGREGATE_MS || now < v.since) this.#open.delete(k);
      if (this.#open.size >= AGGREGATE_KEYS) this.#open.clear();
    }
    this.#open.set(key, { id: this.repo.insert(tenant, row), since: now, count: 1, extra: row.extra });
  }

  list(tenant: Tenant, f: AuditFilter) {
    return this.repo.list(tenant, this.resolve(tenant, f));
  }

  /** A page as GET /auditlog answers it (AuditRepo.entries): each entry names the tenant's host. */
  entries(tenant: Tenant, f: AuditFilter) {
    return this.repo.entries(tenant, this.resolve(tenant, f));
  }

  /** The filter as the repository takes it: `since` read as UTC, `user` widened to the accounts it matches. */
  private resolve(tenant: Tenant, f: AuditFilter): AuditFilter {
    if (!f.since && !f.user) return f;
    let since: string | undefined;
    if (f.since) {
      // "ISO 8601, parsed as UTC": a value without an offset is read as UTC, not local time.
      const s = /[zZ]|[+-]\d\d:?\d\d$/.test(f.since) || !/T/.test(f.since) ? f.since : `${f.since}Z`;
      const t = Date.parse(s);
      if (Number.isNaN(t)) throw new InputError(`invalid query parameter since: not an ISO 8601 date-time: ${f.since}`, 'invalid_request', { field: 'since' });
      since = new Date(t).toISOString();
    }
    // Spec "GET /auditlog": `user` is a case-insensitive substring "on subject or e-mail". An
    // entry names its account by whatever the writer had: the login name (sign-ins), the id, or
    // the e-mail as typed (magic links, recovery). So a filter that matches an account by name,
    // id or e-mail finds that account's entries under any of the three, whichever was written.
    let subjects: string[] | undefined;
    if (f.user && this.users) {
      const q = f.user.toLowerCase();
      subjects = this.users
        .list(tenant)
        .filter((u) => [u.name, u.id, u.email ?? ''].some((x) => x.toLowerCase().includes(q)))
        .flatMap((u) => [u.name, u.id, ...(u.email ? [u.email] : [])]);
    }
    return { ...f, since, subjects };
  }
}
