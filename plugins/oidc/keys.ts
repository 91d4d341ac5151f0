import crypto from 'node:crypto';
import type * as jose from 'jose';
import { loadJose } from './jose.ts';
import { SignThread } from './sign-thread.ts';
import type { Clock, DB, KeyService, Tenant } from '../../server/sdk.ts';
export type SigAlg = 'RS256' | 'ES256';
export const SIG_ALGS: readonly SigAlg[] = ['RS256', 'ES256'];

interface KeyRow {
  kid: string;
  alg: SigAlg;
  public_jwk: string;
  private_sealed: string;
  state: 'active' | 'retiring';
  created_at: string;
  retire_after: string | null;
}

interface LoadedKey {
  kid: string;
  alg: SigAlg;
  publicJwk: jose.JWK;
  publicKey: crypto.KeyObject;
  /** WebCrypto form of the public key, made once (jose verifies with WebCrypto). */
  verifyKey?: Promise<jose.CryptoKey>;
  privateKey?: crypto.KeyObject;
  /** The private key with its signing options, made once (ES256 wants r||s, RFC 7518 §3.4). */
  signKey?: crypto.SignKeyObjectInput;
  /** Encoded protected headers by typ: the same bytes for every token this key signs. */
  headers?: Map<string, string>;
  active: boolean;
}

interface TenantKeys {
  active: Map<SigAlg, LoadedKey>;
  byKid: Map<string, LoadedKey>;
  jwks: { keys: jose.JWK[] };
  loadedAt: number;
}

/** Retired keys kept published per algorithm after a rotation (the newest ones). */
export const RETIRING_KEPT = 2;

/** Multi-process safety: the CLI may rotate while the server runs; reload at most this often. */
const CACHE_MS = 60_000;

/**
 * Per-tenant signing keys, one active RS256 and one active ES256 key each. Private keys are kept
 * sealed with the appliance master key (AAD binds them to tenant and kid). Rotation makes new
 * active keys and keeps the old ones published (state `retiring`) until `retire_after`, so
 * tokens signed just before a rotation still verify (overlap).
 */
export class SigningKeys {
  readonly #cache = new Map<string, TenantKeys>();
  readonly #signer = new SignThread();

  constructor(
    private readonly db: DB,
    private readonly keys: KeyService,
    private readonly clock: Clock,
  ) {}

  /**
   * The tenant's keys as stored. Never makes keys (that is ready(), off the event loop): a tenant
   * whose keys are not made yet gets a set without active keys, which signs nothing and verifies
   * nothing, and is not cached.
   */
  private load(tenant: Tenant): TenantKeys {
    const now = this.clock.now();
    const hit = this.#cache.get(tenant.id);
    if (hit && now - hit.loadedAt < CACHE_MS) return hit;
    const nowIso = new Date(now).toISOString();
    this.db.prepare("DELETE FROM oidc_keys WHERE tenant_id = ? AND state = 'retiring' AND retire_after < ?").run(tenant.id, nowIso);
    const rows = this.rows(tenant);
    const tk: TenantKeys = { active: new Map(), byKid: new Map(), jwks: { keys: [] }, loadedAt: now };
    for (const r of rows) {
      const publicJwk = JSON.parse(r.public_jwk) as jose.JWK;
      const k: LoadedKey = {
        kid: r.kid,
        alg: r.alg,
        publicJwk,
        publicKey: crypto.createPublicKey({ key: publicJwk as crypto.JsonWebKey, format: 'jwk' }),
        active: r.state === 'active',
      };
      if (k.active && !tk.active.has(r.alg)) {
        k.privateKey = crypto.createPrivateKey(this.keys.openString(r.private_sealed, `oidc-key|${tenant.id}|${r.kid}`));
        k.signKey = r.alg === 'ES256' ? { key: k.privateKey, dsaEncoding: 'ieee-p1363' } : { key: k.privateKey };
        k.headers = new Map();
        tk.active.set(r.alg, k);
      }
      tk.byKid.set(r.kid, k);
      tk.jwks.keys.push(publicJwk);
    }
    if (complete(tk)) this.#cache.set(tenant.id, tk);
    return tk;
  }

  private rows(tenant: Tenant): KeyRow[] {
    return this.db.prepare('SELECT * FROM oidc_keys WHERE tenant_id = ? ORDER BY created_at DESC').all(tenant.id) as KeyRow[];
  }

  /**
   * Makes sure the tenant has an active key of each algorithm: `true` at once when it has (no
   * promise to wait on), else a promise that settles once they are made.
   * A tenant's first keys are made on first use, on the libuv thread pool like a rotation's
   * (RSA-2048 blocked the event loop for tens of milliseconds per new tenant), and concurrent
   * first requests for one tenant wait for the same pair, so a burst makes one key per algorithm.
   */
  ready(tenant: Tenant): true | Promise<void> {
    if (complete(this.load(tenant))) return true;
    let p = this.#first.get(tenant.id);
    if (!p) {
      p = this.#makeFirst(tenant).finally(() => this.#first.delete(tenant.id));
      this.#first.set(tenant.id, p);
    }
    return p;
  }

  readonly #first = new Map<string, Promise<void>>();

  async #makeFirst(tenant: Tenant): Promise<void> {
    const have = new Set(
      this.rows(tenant)
        .filter((r) => r.state === 'active')
        .map((r) => r.alg),
    );
    const fresh = await Promise.all(SIG_ALGS.filter((alg) => !have.has(alg)).map(async (alg) => ({ alg, ...(await newKeyPair(alg)) })));
    // INSERT only where no active key of the alg appeared meanwhile (a rotation, or the CLI in another process).
    this.db
      .transaction(() => {
        const exists = this.db.prepare("SELECT 1 FROM oidc_keys WHERE tenant_id = ? AND alg = ? AND state = 'active'");
        const insert = this.db.prepare(
          'INSERT INTO oidc_keys (tenant_id, kid, alg, public_jwk, private_sealed, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        );
        const now = new Date(this.clock.now()).toISOString();
        for (const k of fresh) {
          if (exists.get(tenant.id, k.alg)) continue;
          insert.run(tenant.id, k.kid, k.alg, JSON.stringify(k.publicJwk), this.keys.seal(k.pem, `oidc-key|${tenant.id}|${k.kid}`), 'active', now);
        }
      })
      .immediate();
    this.#cache.delete(tenant.id);
  }

  /**
   * New active keys; the previous ones stay published for `overlapSeconds` (≥ the longest token
   * life), at most RETIRING_KEPT of them per algorithm: 200 rotations in a row once left a 750 KB
   * JWKS that every verification walked, so a rotation storm now costs only the newest keys' overlap.
   * The key pairs are made off the event loop (RSA-2048 takes tens of milliseconds, which a storm
   * of rotations once spent on every tenant's requests), then swapped in one transaction.
   */
  rotate(tenant: Tenant, overlapSeconds: number): Promise<{ kids: string[] }> {
    // A rotation asked for while one runs joins it: both callers get the same new keys, and a
    // burst of requests costs one pair of key generations, not one per request.
    const running = this.#rotating.get(tenant.id);
    if (running) return running;
    const p = this.#rotate(tenant, overlapSeconds).finally(() => this.#rotating.delete(tenant.id));
    this.#rotating.set(tenant.id, p);
    return p;
  }

  readonly #rotating = new Map<string, Promise<{ kids: string[] }>>();

  async #rotate(tenant: Tenant, overlapSeconds: number): Promise<{ kids: string[] }> {
    const fresh = await Promise.all((['RS256', 'ES256'] as const).map(async (alg) => ({ alg, ...(await newKeyPair(alg)) })));
    const now = new Date(this.clock.now());
    const retireAfter = new Date(now.getTime() + overlapSeconds * 1000).toISOString();
    this.db
      .transaction(() => {
        this.db.prepare("UPDATE oidc_keys SET state = 'retiring', retire_after = ? WHERE tenant_id = ? AND state = 'active'").run(retireAfter, tenant.id);
        const insert = this.db.prepare(
          'INSERT INTO oidc_keys (tenant_id, kid, alg, public_jwk, private_sealed, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        );
        for (const k of fresh)
          insert.run(
            tenant.id,
            k.kid,
            k.alg,
            JSON.stringify(k.publicJwk),
            this.keys.seal(k.pem, `oidc-key|${tenant.id}|${k.kid}`),
            'active',
            now.toISOString(),
          );
        this.db
          .prepare(
            `DELETE FROM oidc_keys WHERE tenant_id = ? AND kid IN (
             SELECT kid FROM (SELECT kid, ROW_NUMBER() OVER (PARTITION BY alg ORDER BY created_at DESC, rowid DESC) AS n
                              FROM oidc_keys WHERE tenant_id = ? AND state = 'retiring') WHERE n > ?)`,
          )
          .run(tenant.id, tenant.id, RETIRING_KEPT);
      })
      .immediate();
    this.#cache.delete(tenant.id);
    return { kids: fresh.map((k) => k.kid) };
  }

  async jwks(tenant: Tenant): Promise<{ keys: jose.JWK[] }> {
    const r = this.ready(tenant);
    if (r !== true) await r;
    return this.load(tenant).jwks;
  }

  /** Whether signatures are being made on the signing thread (load started it; sign-thread.ts). */
  get signingOnThread(): boolean {
    return this.#signer.threaded;
  }

  /** ES256 signatures finished from the signing thread's presignatures so far (es256-presign.ts). */
  get presignedSignatures(): number {
    return this.#signer.presigned;
  }

  /** Stops the signing thread if load started one; later signatures are made on the event loop. */
  close(): Promise<void> {
    return this.#signer.close();
  }

  /**
   * Compact JWS (RFC 7515 §7.1) signed with node:crypto directly: jose 6 goes through WebCrypto
   * and converts a KeyObject on every call, which cost about a third of a token request.
   * ES256 signatures are r||s (RFC 7518 §3.4), hence ieee-p1363. Under load the signature is
   * computed on a thread beside the event loop (sign-thread.ts).
   */
  async sign(tenant: Tenant, payload: object, opts: { alg: SigAlg; typ?: string }): Promise<string> {
    const r = this.ready(tenant);
    if (r !== true) await r;
    const k = this.load(tenant).active.get(opts.alg);
    if (!k) throw new Error(`no active ${opts.alg} key for tenant ${tenant.id}`);
    const typ = opts.typ ?? '';
    let head = k.headers!.get(typ);
    if (head === undefined) {
      head = Buffer.from(JSON.stringify({ alg: k.alg, kid: k.kid, ...(typ ? { typ } : {}) })).toString('base64url');
      k.headers!.set(typ, head);
    }
    const input = `${head}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
    return this.#signer.sign(k.signKey!, input);
  }

  /**
   * Verifies a JWT signed by this tenant. The key is chosen by kid among this tenant's keys only,
   * and the algorithm must be the key's own (no alg confusion, no `none`: RFC 8725 §3.1).
   */
  async verify(
    tenant: Tenant,
    token: string,
    opts: { typ?: string; issuer?: string; audience?: string; allowExpired?: boolean } = {},
  ): Promise<jose.JWTPayload> {
    const tk = this.load(tenant);
    const J = await loadJose();
    const header = J.decodeProtectedHeader(token);
    const key = typeof header.kid === 'string' ? tk.byKid.get(header.kid) : undefined;
    if (!key || header.alg !== key.alg) throw new J.errors.JWSSignatureVerificationFailed('unknown key or algorithm');
    key.verifyKey ??= J.importJWK(key.publicJwk, key.alg) as Promise<jose.CryptoKey>;
    const { payload } = await J.jwtVerify(token, await key.verifyKey, {
      algorithms: [key.alg],
      typ: opts.typ,
      issuer: opts.issuer,
      audience: opts.audience,
      clockTolerance: 5,
      currentDate: opts.allowExpired ? new Date(0) : new Date(this.clock.now()),
    });
    return payload;
  }
}

/** Base64url of the left half of SHA-256 (OIDC Core §3.3.2.11 at_hash / c_hash for RS256/ES256). */
export function halfHash(value: string): string {
  const d = crypto.createHash('sha256').update(value).digest();
  return d.subarray(0, d.length / 2).toString('base64url');
}

/** A key pair made on the libuv thread pool, with its kid, public JWK and sealed-to-be PEM. */
async function newKeyPair(alg: SigAlg): Promise<{ kid: string; publicJwk: jose.JWK; pem: string }> {
  const { publicKey, privateKey } = await new Promise<{ publicKey: crypto.KeyObject; privateKey: crypto.KeyObject }>((resolve, reject) => {
    const done = (err: Error | null, publicKey: crypto.KeyObject, privateKey: crypto.KeyObject) => (err ? reject(err) : resolve({ publicKey, privateKey }));
    if (alg === 'RS256') crypto.generateKeyPair('rsa', { modulusLength: 2048 }, done);
    else crypto.generateKeyPair('ec', { namedCurve: 'P-256' }, done);
  });
  return describeKey(alg, publicKey, privateKey);
}

/** Whether a tenant's set has its active key of every algorithm. */
function complete(tk: TenantKeys): boolean {
  return SIG_ALGS.every((alg) => tk.active.has(alg));
}

function describeKey(alg: SigAlg, publicKey: crypto.KeyObject, privateKey: crypto.KeyObject): { kid: string; publicJwk: jose.JWK; pem: string } {
  const jwk = publicKey.export({ format: 'jwk' }) as jose.JWK;
  const kid = `${alg.toLowerCase()}-${crypto.randomBytes(6).toString('base64url')}`;
  return { kid, publicJwk: { ...jwk, kid, alg, use: 'sig' }, pem: privateKey.export({ format: 'pem', type: 'pkcs8' }) as string };
}
