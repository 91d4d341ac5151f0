import { type AuditInput, type AuditWriter, type Clock, InputError, type Tenant, type UserService } from '../../server/sdk.ts';
import type { AuditRepo, AuditFilter } from './repo.ts';

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

export class AuditService implements AuditWriter {
  constructor(
    private readonly repo: AuditRepo,
    private readonly clock: Clock,
    /** The tenant's accounts, so the `user` filter also finds entries by an account's e-mail. */
    private readonly users?: Pick<UserService, 'list'>,
  ) {}

  write(tenant: Tenant, e: AuditInput): void {
    if (!EVENT_RE.test(e.event)) throw new Error(`invalid audit event name ${JSON.stringify(e.event)}`);
    this.repo.insert(tenant, {
      ts: new Date(this.clock.now()).toISOString(),
      event: e.event,
      user: (e.user ?? '').slice(0, 320),
      ip: (e.ip ?? '').slice(0, 64),
      ua: (e.ua ?? '').slice(0, 512),
      extra: formatExtra(e.extra),
    });
  }

  list(tenant: Tenant, f: AuditFilter) {
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
    return this.repo.list(tenant, { ...f, since, subjects });
  }
}
