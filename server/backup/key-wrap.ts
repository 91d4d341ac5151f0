import crypto from 'node:crypto';

/*
 * The master key's wrapping for an archive header (archive.ts describes the format and re-exports
 * this): apart, so the key service, which every command and start opens, does not load the
 * archive reader and writer with it.
 */

export const WRAP_AAD = Buffer.from('sovcomms-backup-v1-master-key');

/** The master key sealed under an archive's wrap key (AES-256-GCM), as the header carries it. */
export interface WrappedKey {
  iv: string;
  tag: string;
  ct: string;
}

/** Seals `plain` (the master key) under the wrap key: the only way it enters an archive (KeyService.wrapFor). */
export function wrapWith(wrapKey: Buffer, plain: Buffer): WrappedKey {
  const iv = crypto.randomBytes(12);
  const c = crypto.createCipheriv('aes-256-gcm', wrapKey, iv);
  c.setAAD(WRAP_AAD);
  const ct = Buffer.concat([c.update(plain), c.final()]);
  return { iv: iv.toString('base64url'), tag: c.getAuthTag().toString('base64url'), ct: ct.toString('base64url') };
}
