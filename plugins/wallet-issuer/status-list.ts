import type * as StatusListModule from '@sd-jwt/jwt-status-list';
import type { Signer } from './signer.ts';

// @sd-jwt/jwt-status-list (with pako) is loaded with the first list signed, not at every start.
let statusListModule: Promise<typeof StatusListModule> | undefined;

/** A compact JWS (RFC 7515) signed ES256 by our Signer (software or HSM). */
export async function signJws(signer: Signer, header: Record<string, unknown>, payload: Record<string, unknown>): Promise<string> {
  const input = `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  return `${input}.${(await signer.sign(Buffer.from(input))).toString('base64url')}`;
}

/**
 * The Status List Token (draft-ietf-oauth-status-list §5.1): a JWT of typ statuslist+jwt whose
 * `sub` is the list's URI (the `uri` every referenced credential carries), `status_list` the
 * zlib-compressed bit array (bits 1: 0 VALID, 1 INVALID), `ttl` how long a verifier may cache it.
 */
export async function statusListToken(o: {
  signer: Signer;
  kid: string;
  x5c: string[];
  uri: string;
  size: number;
  revoked: number[];
  iat: number;
  ttl: number;
}): Promise<string> {
  const bits = new Array<number>(o.size).fill(0);
  for (const i of o.revoked) if (i >= 0 && i < o.size) bits[i] = 1;
  const { StatusList } = await (statusListModule ??= import('@sd-jwt/jwt-status-list'));
  const list = new StatusList(bits, 1);
  return signJws(
    o.signer,
    { alg: 'ES256', typ: 'statuslist+jwt', kid: o.kid, x5c: o.x5c },
    { sub: o.uri, iat: o.iat, exp: o.iat + 2 * o.ttl, ttl: o.ttl, status_list: { bits: 1, lst: list.compressStatusList() } },
  );
}
