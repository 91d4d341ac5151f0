import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { DB } from './store/db.ts';
import { ENV } from './config.ts';
import { wrapWith, type WrappedKey } from './backup/key-wrap.ts';

/**
 * The appliance master key and secrets sealed with it. Secrets that must be used later (webhook
 * signing secrets, trunk passwords, private keys, the admin HMAC secret) are stored as
 * `v1.<iv>.<tag>.<ciphertext>` (AES-256-GCM, base64url), never in the clear.
 *
 * The key comes from, in order: a key handed in by the host process (Electron's OS key store),
 * `SOVCOMMS_MASTER_KEY` (base64 or hex of 32 bytes), or `<data-dir>/master.key` (mode 0600),
 * generated on first start.
 */
export class KeyService {
  readonly source: 'provided' | 'env' | 'file';
  /**
   * Where the key is kept, for the operator: `os-keystore` when the desktop shell hands it over
   * from the OS key store (it says so in SOVCOMMS_MASTER_KEY_STORE), else the source itself.
   */
  readonly store: 'os-keystore' | 'provided' | 'env' | 'file';
  readonly #key: Buffer;

  private constructor(key: Buffer, source: KeyService['source'], store: KeyService['store'] = source) {
    this.#key = key;
    this.source = source;
    this.store = store;
  }

  static load(dataDir: string, opts: { env?: NodeJS.ProcessEnv; provided?: Buffer; create?: boolean } = {}): KeyService {
    if (opts.provided) return new KeyService(checkLen(opts.provided, 'provided master key'), 'provided');
    const env = opts.env ?? process.env;
    const envVal = env[ENV.masterKey];
    if (envVal)
      return new KeyService(checkLen(decodeKey(envVal), ENV.masterKey), 'env', env.SOVCOMMS_MASTER_KEY_STORE === 'os-keystore' ? 'os-keystore' : 'env');
    const file = path.join(dataDir, 'master.key');
    if (!fs.existsSync(file)) {
      if (opts.create === false) throw new Error(`no master key at ${file}`);
      fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      // wx: never overwrite a key another process created a moment ago.
      try {
        fs.writeFileSync(file, crypto.randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
    }
    return new KeyService(checkLen(decodeKey(fs.readFileSync(file, 'utf8').trim()), file), 'file');
  }

  /** Derives a purpose-bound subkey, so one master key never signs two kinds of thing. */
  subkey(purpose: string): Buffer {
    return Buffer.from(crypto.hkdfSync('sha256', this.#key, Buffer.alloc(0), `sovcomms:${purpose}`, 32));
  }

  /** The master key sealed under a backup archive's wrap key: it leaves this class only so. */
  wrapFor(wrapKey: Buffer): WrappedKey {
    return wrapWith(wrapKey, this.#key);
  }

  seal(plain: string | Buffer, aad = ''): string {
    const iv = crypto.randomBytes(12);
    const c = crypto.createCipheriv('aes-256-gcm', this.#key, iv);
    c.setAAD(Buffer.from(aad));
    const ct = Buffer.concat([c.update(typeof plain === 'string' ? Buffer.from(plain, 'utf8') : plain), c.final()]);
    return ['v1', iv.toString('base64url'), c.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }

  open(sealed: string, aad = ''): Buffer {
    const [v, iv, tag, ct] = sealed.split('.');
    if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('not a sealed secret');
    const d = crypto.createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'));
    d.setAAD(Buffer.from(aad));
    d.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]);
  }

  openString(sealed: string, aad = ''): string {
    return this.open(sealed, aad).toString('utf8');
  }
}

function decodeKey(s: string): Buffer {
  if (/^[0-9a-f]{64}$/i.test(s)) return Buffer.from(s, 'hex');
  return Buffer.from(s, 'base64');
}

function checkLen(b: Buffer, where: string): Buffer {
  if (b.length !== 32) throw new Error(`${where}: master key must be 32 bytes (base64 or hex)`);
  return b;
}

/** Settings rows whose values are sealed with the master key. */
export class SecretSettings {
  constructor(
    private readonly db: DB,
    private readonly keys: KeyService,
  ) {}

  get(name: string): string | undefined {
    const row = this.db.prepare('SELECT value FROM settings WHERE key = ?').get(`secret:${name}`) as { value: string } | undefined;
    return row ? this.keys.openString(row.value, name) : undefined;
  }

  set(name: string, value: string): void {
    this.db
      .prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value')
      .run(`secret:${name}`, this.keys.seal(value, name));
  }

  getOrCreate(name: string, make: () => string): string {
    const existing = this.get(name);
    if (existing !== undefined) return existing;
    // INSERT OR IGNORE: a concurrent CLI and server agree on one value.
    this.db.prepare('INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)').run(`secret:${name}`, this.keys.seal(make(), name));
    return this.get(name)!;
  }
}

export function randomToken(bytes = 32): string {
  return crypto.randomBytes(bytes).toString('base64url');
}

export function sha256Hex(s: string | Buffer): string {
  return crypto.createHash('sha256').update(s).digest('hex');
}

/** Constant-time comparison of two strings of possibly different length. */
export function safeEqual(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a).digest();
  const hb = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(ha, hb) && a.length === b.length;
}
