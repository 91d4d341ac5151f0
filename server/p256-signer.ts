import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import type pkcs11js from 'pkcs11js';
import type { ErrorReason } from './errors.ts';

/**
 * pkcs11js, a native addon, is loaded on the first use of an HSM: the SDK re-exports this file, so
 * a static import put it in every server start and every CLI command (~11 ms of CPU, ~4.6 MB).
 */
let pkcs11Module: typeof pkcs11js | undefined;
const pkcs11 = (): typeof pkcs11js => (pkcs11Module ??= createRequire(import.meta.url)('pkcs11js') as typeof pkcs11js);

/**
 * Where a P-256 signing key lives (the RP CA's key, the wallet issuer's keys) and how it signs.
 * Both kinds produce ECDSA P-256 signatures over SHA-256 in the IEEE P1363 form (r || s, 64
 * bytes): what WebCrypto returns and what JWS ES256 (RFC 7518 §3.4) and COSE ES256 (RFC 9053
 * §2.1) carry; an X.509 layer re-encodes it as the DER `Ecdsa-Sig-Value` of RFC 5480 §2.2.
 *
 * One module for every plugin because a PKCS#11 library may be initialised once per process:
 * two private registries (there were two) finalize each other's sessions.
 */
export interface Signer {
  readonly kind: 'software' | 'pkcs11';
  /** SubjectPublicKeyInfo (DER) of the key. */
  readonly spki: Buffer;
  /** ECDSA P-256 with SHA-256 over `data`: r || s (64 bytes). */
  sign(data: Buffer): Promise<Buffer>;
  /** Where the key is, for `ca status` and `issuer status` (never the PIN). */
  describe(): string;
  /** False once the signer failed in a way that needs a fresh session (token gone, session lost). */
  readonly usable: boolean;
  close(): void;
}

/** A software key: PKCS#8 DER held in memory; sealed with the master key at rest by the caller. */
export class SoftwareSigner implements Signer {
  readonly kind = 'software' as const;
  readonly spki: Buffer;
  readonly #key: crypto.KeyObject;

  constructor(pkcs8Der: Buffer) {
    this.#key = crypto.createPrivateKey({ key: pkcs8Der, format: 'der', type: 'pkcs8' });
    const d = this.#key.asymmetricKeyDetails;
    if (this.#key.asymmetricKeyType !== 'ec' || d?.namedCurve !== 'prime256v1') throw new Error('the signing key must be an EC P-256 key');
    this.spki = crypto.createPublicKey(this.#key).export({ format: 'der', type: 'spki' });
  }

  /** A new P-256 key; returns the signer and the PKCS#8 DER to seal. */
  static generate(): { signer: SoftwareSigner; pkcs8: Buffer } {
    const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pkcs8 = privateKey.export({ format: 'der', type: 'pkcs8' });
    return { signer: new SoftwareSigner(pkcs8), pkcs8 };
  }

  async sign(data: Buffer): Promise<Buffer> {
    return crypto.sign('sha256', data, { key: this.#key, dsaEncoding: 'ieee-p1363' });
  }

  describe(): string {
    return 'software (P-256, sealed with the master key)';
  }

  readonly usable = true;

  close(): void {
    // A software key holds no session to end.
  }
}

export interface HsmConfig {
  module: string;
  tokenLabel: string;
  pin: string;
  keyLabel: string;
}

// DER of the named-curve OID prime256v1 (1.2.840.10045.3.1.7): CKA_EC_PARAMS (PKCS#11 v2.40 §2.3.3).
const P256_PARAMS = Buffer.from('06082a8648ce3d030107', 'hex');
// SPKI prefix for an uncompressed P-256 point (RFC 5480 §2): SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING.
const P256_SPKI_PREFIX = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex');

/**
 * One loaded PKCS#11 module per path and process: C_Initialize may run once per process, and
 * login state belongs to the application, shared by all its sessions of a slot (PKCS#11 v2.40
 * §5.6), so tenants on the same module share it. Reference-counted: the last close finalizes.
 */
const modules = new Map<string, { lib: pkcs11js.PKCS11; refs: number; owned: boolean }>();

function openModule(path: string): pkcs11js.PKCS11 {
  const m = modules.get(path);
  if (m) {
    m.refs++;
    return m.lib;
  }
  const lib = new (pkcs11().PKCS11)();
  // Something outside this registry (a test's own handle) may have initialised the library
  // first: then it is used, never finalized here.
  let owned = true;
  try {
    lib.load(path);
    try {
      lib.C_Initialize();
    } catch (e) {
      if (!isPkcs11(e, pkcs11().CKR_CRYPTOKI_ALREADY_INITIALIZED)) throw e;
      owned = false;
    }
  } catch (e) {
    throw new HsmError('module_unavailable', `cannot load PKCS#11 module ${path}: ${(e as Error).message}`);
  }
  modules.set(path, { lib, refs: 1, owned });
  return lib;
}

function releaseModule(path: string): void {
  const m = modules.get(path);
  if (!m || --m.refs > 0) return;
  modules.delete(path);
  if (!m.owned) return;
  try {
    m.lib.C_Finalize();
  } catch {
    // Already finalized or the process is going down: nothing left to release.
  }
  m.lib.close();
}

/** A key store failure; `reason` is the stable cause (ERROR_REASONS.hsm_error), the message has the details for the log. */
export class HsmError extends Error {
  constructor(
    readonly reason: ErrorReason<'hsm_error'>,
    message: string,
  ) {
    super(message);
  }
}

function isPkcs11(e: unknown, code: number): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === code;
}

/**
 * A P-256 key in a PKCS#11 token (SoftHSM2 in the tests). The token is found by label because
 * slot ids are assigned at random by SoftHSM. SoftHSM2 2.6 offers CKM_ECDSA (raw) but not
 * CKM_ECDSA_SHA256, so the SHA-256 digest is computed here and the token signs the 32 bytes;
 * PKCS#11 v2.40 §2.3.1 returns r || s, the same form as WebCrypto.
 */
export class Pkcs11Signer implements Signer {
  readonly kind = 'pkcs11' as const;
  readonly spki: Buffer;
  readonly #lib: pkcs11js.PKCS11;
  readonly #session: Buffer;
  readonly #key: Buffer;
  #closed = false;

  private constructor(
    readonly cfg: Omit<HsmConfig, 'pin'>,
    lib: pkcs11js.PKCS11,
    session: Buffer,
    key: Buffer,
    spki: Buffer,
  ) {
    this.#lib = lib;
    this.#session = session;
    this.#key = key;
    this.spki = spki;
  }

  /**
   * Opens the token and finds the key pair labelled `keyLabel`; with `create`, generates it when
   * absent (non-extractable, sensitive private key). Returns whether it was created.
   */
  static open(cfg: HsmConfig, opts: { create?: boolean } = {}): { signer: Pkcs11Signer; created: boolean } {
    const lib = openModule(cfg.module);
    let session: Buffer | undefined;
    try {
      const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === cfg.tokenLabel);
      if (!slot) throw new HsmError('token_not_found', `no token labelled "${cfg.tokenLabel}" in ${cfg.module}`);
      session = lib.C_OpenSession(slot, pkcs11().CKF_SERIAL_SESSION | pkcs11().CKF_RW_SESSION);
      try {
        lib.C_Login(session, pkcs11().CKU_USER, cfg.pin);
      } catch (e) {
        // Another tenant (or an earlier open) of this process is logged in already: fine.
        if (!isPkcs11(e, pkcs11().CKR_USER_ALREADY_LOGGED_IN)) {
          if (isPkcs11(e, pkcs11().CKR_PIN_INCORRECT)) throw new HsmError('wrong_pin', `wrong PIN for token "${cfg.tokenLabel}"`);
          throw new HsmError('login_failed', `cannot log in to token "${cfg.tokenLabel}": ${(e as Error).message}`);
        }
      }
      let created = false;
      let priv = findOne(lib, session, pkcs11().CKO_PRIVATE_KEY, cfg.keyLabel);
      let pub = findOne(lib, session, pkcs11().CKO_PUBLIC_KEY, cfg.keyLabel);
      if (!priv) {
        if (!opts.create) throw new HsmError('key_not_found', `no private key labelled "${cfg.keyLabel}" on token "${cfg.tokenLabel}"`);
        const id = crypto.randomBytes(16);
        const pair = lib.C_GenerateKeyPair(
          session,
          { mechanism: pkcs11().CKM_EC_KEY_PAIR_GEN },
          [
            { type: pkcs11().CKA_TOKEN, value: true },
            { type: pkcs11().CKA_LABEL, value: cfg.keyLabel },
            { type: pkcs11().CKA_ID, value: id },
            { type: pkcs11().CKA_EC_PARAMS, value: P256_PARAMS },
            { type: pkcs11().CKA_VERIFY, value: true },
          ],
          [
            { type: pkcs11().CKA_TOKEN, value: true },
            { type: pkcs11().CKA_LABEL, value: cfg.keyLabel },
            { type: pkcs11().CKA_ID, value: id },
            { type: pkcs11().CKA_PRIVATE, value: true },
            { type: pkcs11().CKA_SENSITIVE, value: true },
            { type: pkcs11().CKA_EXTRACTABLE, value: false },
            { type: pkcs11().CKA_SIGN, value: true },
          ],
        );
        priv = pair.privateKey;
        pub = pair.publicKey;
        created = true;
      }
      if (!pub) throw new HsmError('no_public_key', `key "${cfg.keyLabel}" has no public key object on the token (needed for its certificate)`);
      const spki = spkiOf(lib, session, pub);
      const { pin: _pin, ...rest } = cfg;
      return { signer: new Pkcs11Signer(rest, lib, session, priv, spki), created };
    } catch (e) {
      if (session)
        try {
          lib.C_CloseSession(session);
        } catch {
          /* closing after a failure */
        }
      releaseModule(cfg.module);
      throw e instanceof HsmError ? e : new HsmError('token_error', `PKCS#11: ${(e as Error).message}`);
    }
  }

  async sign(data: Buffer): Promise<Buffer> {
    if (this.#closed) throw new HsmError('session_closed', 'HSM session closed');
    const digest = crypto.createHash('sha256').update(data).digest();
    try {
      // C_SignInit + C_Sign run synchronously, so no other signature can interleave on this session.
      this.#lib.C_SignInit(this.#session, { mechanism: pkcs11().CKM_ECDSA }, this.#key);
      return Buffer.from(this.#lib.C_Sign(this.#session, digest, Buffer.alloc(64)));
    } catch (e) {
      // The session or the token is gone: the owner opens a fresh signer next time.
      this.#failed = true;
      throw new HsmError('sign_failed', `HSM signature failed: ${(e as Error).message}`);
    }
  }

  #failed = false;

  get usable(): boolean {
    return !this.#closed && !this.#failed;
  }

  describe(): string {
    return `HSM module ${this.cfg.module}, token "${this.cfg.tokenLabel}", key "${this.cfg.keyLabel}"`;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#lib.C_CloseSession(this.#session);
    } catch {
      // The session may be gone with the module already.
    }
    releaseModule(this.cfg.module);
  }
}

/** Opens the token and logs in, then closes: a wrong PIN or label fails before any key is made. */
export function probeToken(cfg: Omit<HsmConfig, 'keyLabel'>): void {
  const lib = openModule(cfg.module);
  let session: Buffer | undefined;
  try {
    const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === cfg.tokenLabel);
    if (!slot) throw new HsmError('token_not_found', `no token labelled "${cfg.tokenLabel}" in ${cfg.module}`);
    session = lib.C_OpenSession(slot, pkcs11().CKF_SERIAL_SESSION);
    try {
      lib.C_Login(session, pkcs11().CKU_USER, cfg.pin);
    } catch (e) {
      if (isPkcs11(e, pkcs11().CKR_PIN_INCORRECT)) throw new HsmError('wrong_pin', `wrong PIN for token "${cfg.tokenLabel}"`);
      if (!isPkcs11(e, pkcs11().CKR_USER_ALREADY_LOGGED_IN))
        throw new HsmError('login_failed', `cannot log in to token "${cfg.tokenLabel}": ${(e as Error).message}`);
    }
  } catch (e) {
    throw e instanceof HsmError ? e : new HsmError('token_error', `PKCS#11: ${(e as Error).message}`);
  } finally {
    if (session)
      try {
        lib.C_CloseSession(session);
      } catch {
        /* closing after the probe */
      }
    releaseModule(cfg.module);
  }
}

function findOne(lib: pkcs11js.PKCS11, session: Buffer, cls: number, label: string): Buffer | undefined {
  lib.C_FindObjectsInit(session, [
    { type: pkcs11().CKA_CLASS, value: cls },
    { type: pkcs11().CKA_KEY_TYPE, value: pkcs11().CKK_EC },
    { type: pkcs11().CKA_LABEL, value: label },
  ]);
  try {
    const found = lib.C_FindObjects(session, 2);
    if (found.length > 1) throw new HsmError('ambiguous_key', `more than one key labelled "${label}" on the token`);
    return found[0];
  } finally {
    lib.C_FindObjectsFinal(session);
  }
}

/** CKA_EC_POINT is the DER OCTET STRING of the uncompressed point (PKCS#11 v2.40 §2.3.3). */
function spkiOf(lib: pkcs11js.PKCS11, session: Buffer, pub: Buffer): Buffer {
  const [ecParams, ecPoint] = lib.C_GetAttributeValue(session, pub, [{ type: pkcs11().CKA_EC_PARAMS }, { type: pkcs11().CKA_EC_POINT }]);
  if (!ecParams?.value || !Buffer.from(ecParams.value as Buffer).equals(P256_PARAMS)) throw new HsmError('unsupported_key', 'the HSM key is not a P-256 key');
  let point = Buffer.from(ecPoint!.value as Buffer);
  // Some modules return the raw point, most the OCTET STRING (04 41 04 ...).
  if (point.length === 67 && point[0] === 0x04 && point[1] === 0x41) point = point.subarray(2);
  if (point.length !== 65 || point[0] !== 0x04) throw new HsmError('token_error', 'unexpected CKA_EC_POINT encoding');
  return Buffer.concat([P256_SPKI_PREFIX, point]);
}
