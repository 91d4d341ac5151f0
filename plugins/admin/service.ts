import {
  type ApiKeyInfo,
  type AuditWriter,
  type AuthService,
  ConflictError,
  type DB,
  generatePassword,
  InputError,
  NotAllowedError,
  NotFoundError,
  type Principal,
  type Role,
  type Tenant,
  type TenantService,
  type User,
  type UserLanguage,
  type UserService,
  type UserStatus,
} from '../../server/sdk.ts';
import type { KeyView, UserView } from './schemas.ts';

/** Who made a change and from where: every change below is audited with it. */
export interface Actor {
  principal: Principal;
  /** The tenant the request came in on (the actor's own). */
  tenant: Tenant;
  ip: string;
  ua: string;
}

export function userView(u: User, t: Tenant): UserView {
  return {
    id: u.id,
    name: u.name,
    email: u.email,
    language: u.language,
    role: u.role,
    status: u.status,
    hasPassword: u.hasPassword,
    createdAtUtc: u.createdAt,
    tenant: t.host,
  };
}

function keyView(k: ApiKeyInfo, t: Tenant, userStatus: UserStatus): KeyView {
  return {
    id: k.id,
    userId: k.userId,
    userName: k.userName,
    userStatus,
    name: k.name,
    prefix: k.prefix,
    status: k.revokedAt ? 'revoked' : 'active',
    createdAtUtc: k.createdAt,
    createdBy: k.createdBy,
    lastUsedAtUtc: k.lastUsedAt,
    revokedAtUtc: k.revokedAt,
    tenant: t.host,
  };
}

/**
 * User and ak_ key administration for the console, over the core's user and auth services (no
 * HTTP here). Each tenant is addressed explicitly; reaching past the caller's own tenant needs a
 * super-admin (spec: an admin of the primary tenant). Every change is audited in the tenant it
 * changed, naming the actor (and the actor's tenant when it is another one).
 */
export class AdminService {
  constructor(
    private readonly db: DB,
    private readonly users: UserService,
    private readonly auth: AuthService,
    private readonly tenants: TenantService,
    private readonly audit: AuditWriter,
  ) {}

  /**
   * The tenants a request acts on. No `tenant`, or one of the caller's own hosts: the caller's
   * tenant, for any admin. Another host or `*` (every tenant, where `many` allows it): super-admin
   * only, refused before the host is looked up, so an ordinary admin learns nothing about others.
   */
  scope(actor: Actor, tenantParam: string | undefined, many: boolean): Tenant[] {
    if (tenantParam === undefined) return [actor.tenant];
    const t = tenantParam === '*' ? undefined : this.tenants.byHost(tenantParam);
    if (t?.id === actor.tenant.id) return [t];
    if (!actor.principal.superAdmin) throw new NotAllowedError('acting on another tenant needs a super-admin (an admin of the primary tenant)');
    if (tenantParam === '*') {
      if (!many)
        throw new InputError('invalid query parameter tenant: * (every tenant) is for lists only; name one host', 'invalid_request', { field: 'tenant' });
      return this.tenants.list();
    }
    if (!t) throw new NotFoundError(`no tenant with host ${tenantParam}`);
    return [t];
  }

  /** The one tenant of a change (`*` refused). */
  target(actor: Actor, tenantParam: string | undefined): Tenant {
    return this.scope(actor, tenantParam, false)[0]!;
  }

  private write(t: Tenant, actor: Actor, event: string, extra: Record<string, string | boolean>): void {
    // `via`: a super-admin's change in another tenant names where it came from.
    const via = t.id === actor.tenant.id ? {} : { via: actor.tenant.host };
    this.audit.write(t, {
      event,
      user: actor.principal.userName ?? actor.principal.subject,
      ip: actor.ip,
      ua: actor.ua,
      extra: { ...extra, ...via },
    });
  }

  // ---- users -----------------------------------------------------------------------------------

  listUsers(tenants: Tenant[], f: { status?: UserStatus; role?: Role; limit: number; offset: number }): { data: UserView[]; total: number } {
    // An appliance holds tens of accounts per tenant, not millions: filtering in memory keeps
    // every query tenant-scoped (the core's rule) without a cross-tenant SQL path.
    const all = tenants.flatMap((t) =>
      this.users
        .list(t)
        .filter((u) => (!f.status || u.status === f.status) && (!f.role || u.role === f.role))
        .map((u) => userView(u, t)),
    );
    return { data: all.slice(f.offset, f.offset + f.limit), total: all.length };
  }

  user(t: Tenant, id: string): User {
    const u = this.users.get(t, id);
    if (!u) throw new NotFoundError(`no user ${id}`);
    return u;
  }

  async addUser(
    t: Tenant,
    actor: Actor,
    input: { name: string; role: Role; email?: string | null; password?: string; generatePassword: boolean; language?: UserLanguage | null },
  ): Promise<{ user: User; password?: string }> {
    const password = input.generatePassword ? generatePassword() : input.password;
    const user = await this.users.add(t, {
      name: input.name,
      role: input.role,
      email: input.email ?? null,
      password: password ?? null,
      language: input.language ?? null,
    });
    this.write(t, actor, 'user-add', { target: user.name, role: user.role, status: user.status, generated: input.generatePassword });
    return input.generatePassword ? { user, password } : { user };
  }

  /**
   * An admin's role, or an active admin's status, may change only while another active admin
   * remains: a tenant without one could not be administered except from the command line.
   * Checked and changed in one IMMEDIATE transaction, so two admins demoting each other at the
   * same time (or the CLI in another process) cannot both pass the check.
   */
  private guarded(t: Tenant, id: string, change: (u: User) => void, wouldRemoveAdmin: (u: User) => boolean): User {
    return this.db
      .transaction(() => {
        const u = this.user(t, id);
        if (wouldRemoveAdmin(u) && !this.users.list(t).some((o) => o.id !== u.id && o.role === 'admin' && o.status === 'active')) {
          throw new ConflictError('last_admin', `${u.name} is the last active admin of ${t.host}; make another user admin first`);
        }
        change(u);
        return this.user(t, id);
      })
      .immediate();
  }

  setLanguage(t: Tenant, actor: Actor, id: string, language: UserLanguage | null): User {
    const before = this.user(t, id);
    if (before.language === language) return before;
    const after = this.users.setLanguage(t, before.name, language);
    this.write(t, actor, 'user-language-change', { target: after.name, from: before.language ?? 'request', to: after.language ?? 'request' });
    return after;
  }

  setRole(t: Tenant, actor: Actor, id: string, role: Role): User {
    const before = this.user(t, id);
    if (before.role === role) return before;
    const after = this.guarded(
      t,
      id,
      (u) => {
        this.users.setRole(t, u.name, role);
      },
      (u) => u.role === 'admin' && u.status === 'active' && role !== 'admin',
    );
    this.write(t, actor, 'user-role-change', { target: after.name, from: before.role, to: after.role });
    return after;
  }

  async resetPassword(t: Tenant, actor: Actor, id: string, given: string | undefined): Promise<{ user: User; password?: string }> {
    const u = this.user(t, id);
    const password = given ?? generatePassword();
    // The core checks the policy (400 weak_password) and keeps a disabled account disabled.
    const user = await this.users.setPassword(t, u.name, password);
    this.write(t, actor, 'user-password-reset', { target: user.name, generated: given === undefined });
    return given === undefined ? { user, password } : { user };
  }

  /** Disabled: no sign-in, and the bearer verifier and the ak_ lookup refuse the account's tokens and keys. */
  disable(t: Tenant, actor: Actor, id: string): User {
    const before = this.user(t, id);
    if (before.status === 'disabled') return before;
    if (t.id === actor.tenant.id && id === actor.principal.subject) {
      throw new ConflictError('cannot_disable_self', 'an admin cannot disable their own account; ask another admin');
    }
    const after = this.guarded(
      t,
      id,
      (u) => {
        this.users.setStatus(t, u.id, 'disabled');
      },
      (u) => u.role === 'admin' && u.status === 'active',
    );
    this.write(t, actor, 'user-disable', { target: after.name, from: before.status });
    return after;
  }

  /** Back to active, or to invited when the account never had a password (it must still be claimed). */
  enable(t: Tenant, actor: Actor, id: string): User {
    const before = this.user(t, id);
    if (before.status !== 'disabled') return before;
    this.users.setStatus(t, id, before.hasPassword ? 'active' : 'invited');
    const after = this.user(t, id);
    this.write(t, actor, 'user-enable', { target: after.name, to: after.status });
    return after;
  }

  // ---- ak_ keys --------------------------------------------------------------------------------

  listKeys(tenants: Tenant[], f: { user?: string; status?: 'active' | 'revoked'; limit: number; offset: number }): { data: KeyView[]; total: number } {
    const all = tenants.flatMap((t) => {
      const status = new Map(this.users.list(t).map((u) => [u.id, u.status]));
      return this.auth
        .listApiKeys(t)
        .filter((k) => (!f.user || k.userName.toLowerCase() === f.user.toLowerCase()) && (!f.status || (f.status === 'revoked') === (k.revokedAt !== null)))
        .map((k) => keyView(k, t, status.get(k.userId) ?? 'disabled'));
    });
    return { data: all.slice(f.offset, f.offset + f.limit), total: all.length };
  }

  /** Revokes a key of this tenant; revoking it again answers the same record and audits nothing. */
  revokeKey(t: Tenant, actor: Actor, id: string): KeyView {
    const before = this.auth.getApiKey(t, id);
    if (!before) throw new NotFoundError(`no API key ${id}`);
    const after = before.revokedAt ? before : this.auth.revokeApiKey(t, id);
    // `id`, not a key-named field: the audit writer drops keys that look like secrets.
    if (!before.revokedAt) this.write(t, actor, 'apikey-revoke', { id: after.id, owner: after.userName });
    return keyView(after, t, this.users.get(t, after.userId)?.status ?? 'disabled');
  }
}
