import crypto from 'node:crypto';
import pkcs11js from 'pkcs11js';
import type { Signer } from './signer.ts';

export interface HsmConfig {
  module: string;
  tokenLabel: string;
  pin: string;
  keyLabel: string;
}

export class HsmError extends Error {}

// DER of the named-curve OID prime256v1: CKA_EC_PARAMS (PKCS#11 v2.40 §2.3.3).
const P256_PARAMS = Buffer.from('06082a8648ce3d030107', 'hex');
// SPKI prefix of an uncompressed P-256 point (RFC 5480 §2).
const P256_SPKI_PREFIX = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex');

/**
 * One loaded module per path in this plugin, reference-counted. C_Initialize runs once per
 * process (PKCS#11 v2.40 §5.4): when another part of the appliance (the RP CA) initialised the
 * same library first, CKR_CRYPTOKI_ALREADY_INITIALIZED is fine and this plugin never finalizes it.
 */
const modules = new Map<string, { lib: pkcs11js.PKCS11; refs: number; owned: boolean }>();

function openModule(path: string): pkcs11js.PKCS11 {
  const m = modules.get(path);
  if (m) {
    m.refs++;
    return m.lib;
  }
  const lib = new pkcs11js.PKCS11();
  let owned = true;
  try {
    lib.load(path);
    try {
      lib.C_Initialize();
    } catch (e) {
      if (!isCode(e, pkcs11js.CKR_CRYPTOKI_ALREADY_INITIALIZED)) throw e;
      owned = false;
    }
  } catch (e) {
    throw new HsmError(`cannot load PKCS#11 module ${path}: ${(e as Error).message}`);
  }
  modules.set(path, { lib, refs: 1, owned });
  return lib;
}

function releaseModule(path: string): void {
  const m = modules.get(path);
  if (!m || --m.refs > 0) return;
  modules.delete(path);
  if (m.owned)
    try {
      m.lib.C_Finalize();
    } catch {
      // Already finalized, or the process is going down.
    }
}

function isCode(e: unknown, code: number): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === code;
}

/**
 * A P-256 issuer key in a PKCS#11 token (SoftHSM2 in the tests), found by token and key label.
 * SoftHSM2 offers raw CKM_ECDSA only, so SHA-256 is computed here and the token signs the digest;
 * PKCS#11 v2.40 §2.3.1 returns r || s, the form JWS and COSE carry.
 */
export class Pkcs11Signer implements Signer {
  readonly kind = 'pkcs11' as const;
  #closed = false;

  private constructor(
    private readonly cfg: Omit<HsmConfig, 'pin'>,
    private readonly lib: pkcs11js.PKCS11,
    private readonly session: Buffer,
    private readonly key: Buffer,
    readonly spki: Buffer,
  ) {}

  /** Opens the token and finds the key `keyLabel`; with `create`, generates it (sensitive, non-extractable). */
  static open(cfg: HsmConfig, opts: { create?: boolean } = {}): { signer: Pkcs11Signer; created: boolean } {
    const lib = openModule(cfg.module);
    let session: Buffer | undefined;
    try {
      const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === cfg.tokenLabel);
      if (!slot) throw new HsmError(`no token labelled "${cfg.tokenLabel}" in ${cfg.module}`);
      session = lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION);
      try {
        lib.C_Login(session, pkcs11js.CKU_USER, cfg.pin);
      } catch (e) {
        if (isCode(e, pkcs11js.CKR_PIN_INCORRECT)) throw new HsmError(`wrong PIN for token "${cfg.tokenLabel}"`);
        if (!isCode(e, pkcs11js.CKR_USER_ALREADY_LOGGED_IN)) throw new HsmError(`cannot log in to token "${cfg.tokenLabel}": ${(e as Error).message}`);
      }
      let created = false;
      let priv = findOne(lib, session, pkcs11js.CKO_PRIVATE_KEY, cfg.keyLabel);
      let pub = findOne(lib, session, pkcs11js.CKO_PUBLIC_KEY, cfg.keyLabel);
      if (!priv) {
        if (!opts.create) throw new HsmError(`no private key labelled "${cfg.keyLabel}" on token "${cfg.tokenLabel}"`);
        const id = crypto.randomBytes(16);
        const pair = lib.C_GenerateKeyPair(
          session,
          { mechanism: pkcs11js.CKM_EC_KEY_PAIR_GEN },
          [
            { type: pkcs11js.CKA_TOKEN, value: true },
            { type: pkcs11js.CKA_LABEL, value: cfg.keyLabel },
            { type: pkcs11js.CKA_ID, value: id },
            { type: pkcs11js.CKA_EC_PARAMS, value: P256_PARAMS },
            { type: pkcs11js.CKA_VERIFY, value: true },
          ],
          [
            { type: pkcs11js.CKA_TOKEN, value: true },
            { type: pkcs11js.CKA_LABEL, value: cfg.keyLabel },
            { type: pkcs11js.CKA_ID, value: id },
            { type: pkcs11js.CKA_PRIVATE, value: true },
            { type: pkcs11js.CKA_SENSITIVE, value: true },
            { type: pkcs11js.CKA_EXTRACTABLE, value: false },
            { type: pkcs11js.CKA_SIGN, value: true },
          ],
        );
        priv = pair.privateKey;
        pub = pair.publicKey;
        created = true;
      }
      if (!pub) throw new HsmError(`key "${cfg.keyLabel}" has no public key object on the token`);
      const { pin: _pin, ...rest } = cfg;
      return { signer: new Pkcs11Signer(rest, lib, session, priv, spkiOf(lib, session, pub)), created };
    } catch (e) {
      if (session)
        try {
          lib.C_CloseSession(session);
        } catch {
          /* closing after a failure */
        }
      releaseModule(cfg.module);
      throw e instanceof HsmError ? e : new HsmError(`PKCS#11: ${(e as Error).message}`);
    }
  }

  async sign(data: Buffer): Promise<Buffer> {
    if (this.#closed) throw new HsmError('HSM session closed');
    const digest = crypto.createHash('sha256').update(data).digest();
    try {
      // C_SignInit + C_Sign run synchronously: no other signature interleaves on this session.
      this.lib.C_SignInit(this.session, { mechanism: pkcs11js.CKM_ECDSA }, this.key);
      return Buffer.from(this.lib.C_Sign(this.session, digest, Buffer.alloc(64)));
    } catch (e) {
      throw new HsmError(`HSM signature failed: ${(e as Error).message}`);
    }
  }

  describe(): string {
    return `HSM module ${this.cfg.module}, token "${this.cfg.tokenLabel}", key "${this.cfg.keyLabel}"`;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.lib.C_CloseSession(this.session);
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
    if (!slot) throw new HsmError(`no token labelled "${cfg.tokenLabel}" in ${cfg.module}`);
    session = lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
    try {
      lib.C_Login(session, pkcs11js.CKU_USER, cfg.pin);
    } catch (e) {
      if (isCode(e, pkcs11js.CKR_PIN_INCORRECT)) throw new HsmError(`wrong PIN for token "${cfg.tokenLabel}"`);
      if (!isCode(e, pkcs11js.CKR_USER_ALREADY_LOGGED_IN)) throw new HsmError(`cannot log in to token "${cfg.tokenLabel}": ${(e as Error).message}`);
    }
  } catch (e) {
    throw e instanceof HsmError ? e : new HsmError(`PKCS#11: ${(e as Error).message}`);
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
    { type: pkcs11js.CKA_CLASS, value: cls },
    { type: pkcs11js.CKA_KEY_TYPE, value: pkcs11js.CKK_EC },
    { type: pkcs11js.CKA_LABEL, value: label },
  ]);
  try {
    const found = lib.C_FindObjects(session, 2);
    if (found.length > 1) throw new HsmError(`more than one key labelled "${label}" on the token`);
    return found[0];
  } finally {
    lib.C_FindObjectsFinal(session);
  }
}

/** CKA_EC_POINT is the DER OCTET STRING of the uncompressed point (PKCS#11 v2.40 §2.3.3). */
function spkiOf(lib: pkcs11js.PKCS11, session: Buffer, pub: Buffer): Buffer {
  const [ecParams, ecPoint] = lib.C_GetAttributeValue(session, pub, [{ type: pkcs11js.CKA_EC_PARAMS }, { type: pkcs11js.CKA_EC_POINT }]);
  if (!ecParams?.value || !Buffer.from(ecParams.value as Buffer).equals(P256_PARAMS)) throw new HsmError('the HSM key is not a P-256 key');
  let point = Buffer.from(ecPoint!.value as Buffer);
  if (point.length === 67 && point[0] === 0x04 && point[1] === 0x41) point = point.subarray(2);
  if (point.length !== 65 || point[0] !== 0x04) throw new HsmError('unexpected CKA_EC_POINT encoding');
  return Buffer.concat([P256_SPKI_PREFIX, point]);
}
