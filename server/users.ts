import crypto from 'node:crypto';
import { promisify } from 'node:util';
import { systemClock, type Clock } from './clock.ts';
import type { DB } from './store/db.ts';
import type { Tenant } from './tenancy.ts';
import { ConflictError, InputError, NotFoundError } from './errors.ts';

const scrypt = promisify(crypto.scrypt) as (pw: crypto.BinaryLike, salt: crypto.BinaryLike, len: number, opts: crypto.ScryptOptions) => Promise<Buffer>;

export type Role = 'admin' | 'user';
export type UserStatus = 'active' | 'invited' | 'disabled';
/** The languages the appliance's mails and pages speak. */
export const USER_LANGUAGES = ['en', 'de'] as const;
export type UserLanguage = (typeof USER_LANGUAGES)[number];

export interface User {
  id: string;
  tenantId: string;
  name: string;
  email: string | null;
  /** The language of the mails sent to this account; null follows the request's language. */
  language: UserLanguage | null;
  role: Role;
  status: UserStatus;
  hasPassword: boolean;
  createdAt: string;
}

interface UserRow {
  id: string;
  tenant_id: string;
  name: string;
  email: string | null;
  language: UserLanguage | null;
  role: Role;
  password_hash: string | null;
  status: UserStatus;
  created_at: string;
}

// scrypt N=2^15, r=8, p=1 (OWASP 2023 minimum is N=2^17 with 64 MiB; 2^15 keeps a sign-in under
// ~60 ms on the 2-core appliance while still costing an attacker 32 MiB per guess).
const KDF = { N: 1 << 15, r: 8, p: 1, keylen: 32, maxmem: 64 * 1024 * 1024 };

export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const dk = await scrypt(password.normalize('NFC'), salt, KDF.keylen, { N: KDF.N, r: KDF.r, p: KDF.p, maxmem: KDF.maxmem });
  return `scrypt$${KDF.N}$${KDF.r}$${KDF.p}$${salt.toString('base64url')}$${dk.toString('base64url')}`;
}

/** A hash of a random password, checked against when the account does not exist (equal timing). */
let dummyHash: Promise<string> | undefined;

export async function verifyPassword(password: string, stored: string | null | undefined): Promise<boolean> {
  const target = stored ?? (await (dummyHash ??= hashPassword(crypto.randomBytes(16).toString('hex'))));
  const [alg, n, r, p, salt, hash] = target.split('$');
  if (alg !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const dk = await scrypt(password.normalize('NFC'), Buffer.from(salt, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: KDF.maxmem,
  });
  return crypto.timingSafeEqual(dk, expected) && stored != null;
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$/;

function toUser(r: UserRow): User {
  return {
    id: r.id,
    tenantId: r.tenant_id,
    name: r.name,
    email: r.email,
    language: r.language ?? null,
    role: r.role,
    status: r.status,
    hasPassword: !!r.password_hash,
    createdAt: r.created_at,
  };
}

/** Accounts of a tenant. Every query takes the tenant first: no cross-tenant read by accident. */
export class UserService {
  constructor(
    private readonly db: DB,
    private readonly clock: Clock = systemClock,
  ) {}

  get(tenant: Tenant, id: string): User | undefined {
    const r = this.db.prepare('SELECT * FROM users WHERE tenant_id = ? AND id = ?').get(tenant.id, id) as UserRow | undefined;
    return r && toUser(r);
  }

  byName(tenant: Tenant, name: string): User | undefined {
    const r = this.db.prepare('SELECT * FROM users WHERE tenant_id = ? AND name = ? COLLATE NOCASE').get(tenant.id, name) as UserRow | undefined;
    return r && toUser(r);
  }

  /** By login name or e-mail (sign-in accepts either). */
  byLogin(tenant: Tenant, login: string): User | undefined {
    return (
      this.byName(tenant, login) ??
      (() => {
        const r = this.db.prepare('SELECT * FROM users WHERE tenant_id = ? AND email = ? COLLATE NOCASE ORDER BY created_at LIMIT 1').get(tenant.id, login) as
          UserRow | undefined;
        return r && toUser(r);
      })()
    );
  }

  passwordHash(tenant: Tenant, userId: string): string | null {
    const r = this.db.prepare('SELECT password_hash FROM users WHERE tenant_id = ? AND id = ?').get(tenant.id, userId) as
      { password_hash: string | null } | undefined;
    return r?.password_hash ?? null;
  }

  list(tenant: Tenant): User[] {
    return (this.db.prepare('SELECT * FROM users WHERE tenant_id = ? ORDER BY name').all(tenant.id) as UserRow[]).map(toUser);
  }

  async add(
    tenant: Tenant,
    input: { name: string; role?: Role; email?: string | null; password?: string | null; language?: UserLanguage | null },
  ): Promise<User> {
    if (!NAME_RE.test(input.name)) throw new InputError(`invalid user name: ${JSON.stringify(input.name)} (letters, digits and . _ @ + -)`);
    const role = input.role ?? 'user';
    if (role !== 'admin' && role !== 'user') throw new InputError(`invalid role: ${String(role)} (admin or user)`);
    if (input.email != null && !/^[^\s@]+@[^\s@]+$/.test(input.email)) throw new InputError(`invalid e-mail: ${input.email}`);
    if (input.password != null) checkPasswordPolicy(input.password);
    const hash = input.password ? await hashPassword(input.password) : null;
    const id = 'u_' + crypto.randomBytes(8).toString('hex');
    const now = new Date(this.clock.now()).toISOString();
    try {
      this.db
        .prepare(
          'INSERT INTO users (id, tenant_id, name, email, language, role, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        )
        .run(id, tenant.id, input.name, input.email ?? null, input.language ?? null, role, hash, hash ? 'active' : 'invited', now, now);
    } catch (e) {
      if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw new ConflictError('duplicate_user', `user ${input.name} already exists`);
      throw e;
    }
    return this.get(tenant, id)!;
  }

  async setPassword(tenant: Tenant, name: string, password: string): Promise<User> {
    const u = this.byName(tenant, name);
    if (!u) throw new NotFoundError(`no user ${name}`);
    checkPasswordPolicy(password);
    this.db
      .prepare(
        "UPDATE users SET password_hash = ?, status = CASE status WHEN 'invited' THEN 'active' ELSE status END, updated_at = ? WHERE tenant_id = ? AND id = ?",
      )
      .run(await hashPassword(password), new Date(this.clock.now()).toISOString(), tenant.id, u.id);
    return this.get(tenant, u.id)!;
  }

  /** The language of the account's mails; null to follow the request's language again. */
  setLanguage(tenant: Tenant, name: string, language: UserLanguage | null): User {
    if (language !== null && !USER_LANGUAGES.includes(language)) throw new InputError(`invalid language: ${language} (en or de)`);
    const u = this.byName(tenant, name);
    if (!u) throw new NotFoundError(`no user ${name}`);
    this.db
      .prepare('UPDATE users SET language = ?, updated_at = ? WHERE tenant_id = ? AND id = ?')
      .run(language, new Date(this.clock.now()).toISOString(), tenant.id, u.id);
    return this.get(tenant, u.id)!;
  }

  setRole(tenant: Tenant, name: string, role: Role): User {
    if (role !== 'admin' && role !== 'user') throw new InputError(`invalid role: ${String(role)} (admin or user)`);
    const u = this.byName(tenant, name);
    if (!u) throw new NotFoundError(`no user ${name}`);
    this.db
      .prepare('UPDATE users SET role = ?, updated_at = ? WHERE tenant_id = ? AND id = ?')
      .run(role, new Date(this.clock.now()).toISOString(), tenant.id, u.id);
    return this.get(tenant, u.id)!;
  }

  setStatus(tenant: Tenant, userId: string, status: UserStatus): void {
    this.db
      .prepare('UPDATE users SET status = ?, updated_at = ? WHERE tenant_id = ? AND id = ?')
      .run(status, new Date(this.clock.now()).toISOString(), tenant.id, userId);
  }
}

export function checkPasswordPolicy(pw: string): void {
  if (pw.length < 10) throw new InputError('password too short: at least 10 characters', 'weak_password');
  if (pw.length > 1024) throw new InputError('password too long: at most 1024 characters', 'weak_password');
}

/** A readable random password for first-start admin accounts. */
export function generatePassword(): string {
  return crypto.randomBytes(18).toString('base64url');
}
