/**
 * The mdoc side of the other party, with @owf/mdoc 0.6 (code no one here wrote): an issuer that
 * signs a PID mdoc (MSO, issuerAuth with an x5chain from the test CA) and a wallet that answers
 * with a DeviceResponse signed over `SessionTranscript.forOid4Vp`. Node's crypto stands behind
 * the library's context callbacks.
 */
import crypto from 'node:crypto';
import * as jose from 'jose';
import {
  CoseKey,
  DateOnly,
  DeviceKey,
  DeviceNamespaces,
  DeviceRequest,
  DeviceSignedItems,
  DocRequest,
  Holder as MdocHolder,
  Issuer,
  ItemsRequest,
  KeyAuthorizations,
  type MdocContext,
  SessionTranscript,
  SignatureAlgorithm,
} from '@owf/mdoc';
import type { Holder, TestCa } from './wallet.ts';

export const PID_DOCTYPE = 'eu.europa.ec.eudi.pid.1';

const HASH: Record<string, string> = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };

export const mdocCtx: Pick<MdocContext, 'crypto' | 'cose'> = {
  crypto: {
    random: (n) => new Uint8Array(crypto.randomBytes(n)),
    digest: ({ digestAlgorithm, bytes }) => new Uint8Array(crypto.createHash(HASH[digestAlgorithm]!).update(bytes).digest()),
    calculateEphemeralMacKey: () => {
      throw new Error('no MAC in OpenID4VP');
    },
  },
  cose: {
    sign1: {
      sign: ({ toBeSigned, key }) => {
        const k = crypto.createPrivateKey({ key: key.jwk as crypto.JsonWebKey, format: 'jwk' });
        return new Uint8Array(crypto.sign('sha256', toBeSigned, { key: k, dsaEncoding: 'ieee-p1363' }));
      },
      verify: () => {
        throw new Error('the wallet verifies nothing here');
      },
    },
    mac0: {
      sign: () => {
        throw new Error('no MAC');
      },
      verify: () => {
        throw new Error('no MAC');
      },
    },
  },
};

export const PID_MDOC_CLAIMS = {
  family_name: 'Mustermann',
  given_name: 'Erika',
  birth_date: new DateOnly('1964-08-12'),
  age_over_18: true,
  nationality: ['DE'],
};

/** An IssuerSigned PID from the test CA's signer certificate (the DS; the root is the IACA). */
export async function issueMdocPid(
  ca: TestCa,
  holder: Holder,
  opts: { docType?: string; signed?: Date; validFrom?: Date; validUntil?: Date; keyAuthorizations?: KeyAuthorizations } = {},
) {
  const docType = opts.docType ?? PID_DOCTYPE;
  const issuer = new Issuer(docType, mdocCtx);
  issuer.addIssuerNamespace(PID_DOCTYPE, PID_MDOC_CLAIMS);
  const now = Date.now();
  return issuer.sign({
    signingKey: CoseKey.fromJwk(ca.issuerJwk as Record<string, unknown>),
    certificates: [new Uint8Array(Buffer.from(ca.x5c[0]!, 'base64'))],
    algorithm: SignatureAlgorithm.ES256,
    digestAlgorithm: 'SHA-256',
    // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- the mdoc library's own DeviceKey, from its own factory
    deviceKeyInfo: { deviceKey: DeviceKey.fromJwk(holder.publicJwk as Record<string, unknown>), keyAuthorizations: opts.keyAuthorizations },
    validityInfo: {
      signed: opts.signed ?? new Date(now - 60_000),
      validFrom: opts.validFrom ?? new Date(now - 60_000),
      validUntil: opts.validUntil ?? new Date(now + 30 * 86_400_000),
    },
  });
}

export interface Handover {
  clientId: string;
  nonce: string;
  responseUri: string;
  /** The verifier's encryption JWK when the response goes encrypted (its thumbprint enters the handover). */
  encJwk?: jose.JWK;
}

/** The wallet's DeviceResponse for a DCQL request of `names`, device-signed over the OpenID4VP 1.0 SessionTranscript. */
export async function presentMdoc(
  issuerSigned: Awaited<ReturnType<typeof issueMdocPid>>,
  deviceKey: Holder,
  h: Handover,
  opts: { names?: string[]; docType?: string; deviceSigned?: Record<string, unknown> } = {},
): Promise<Uint8Array> {
  const thumb = h.encJwk ? new Uint8Array(Buffer.from(await jose.calculateJwkThumbprint(h.encJwk, 'sha256'), 'base64url')) : undefined;
  const sessionTranscript = await SessionTranscript.forOid4Vp(
    { clientId: h.clientId, nonce: h.nonce, responseUri: h.responseUri, jwkThumbprint: thumb },
    mdocCtx,
  );
  const names = opts.names ?? ['family_name', 'given_name', 'birth_date'];
  const deviceRequest = DeviceRequest.create({
    docRequests: [
      DocRequest.create({
        itemsRequest: ItemsRequest.create({
          docType: opts.docType ?? PID_DOCTYPE,
          namespaces: { [PID_DOCTYPE]: Object.fromEntries(names.map((n) => [n, false])) },
        }),
      }),
    ],
  });
  const dr = await MdocHolder.createDeviceResponseForDeviceRequest(
    {
      deviceRequest,
      sessionTranscript,
      issuerSigned: [issuerSigned],
      // alg from the key goes into the protected header (18013-5 §9.1.3.6).
      signature: { signingKey: CoseKey.fromJwk({ ...(deviceKey.privateJwk as Record<string, unknown>), alg: 'ES256' }) },
      ...(opts.deviceSigned
        ? {
            deviceNamespaces: DeviceNamespaces.create({
              deviceNamespaces: new Map([[PID_DOCTYPE, DeviceSignedItems.create({ deviceSignedItems: new Map(Object.entries(opts.deviceSigned)) })]]),
            }),
          }
        : {}),
    },
    mdocCtx,
  );
  return dr.encode();
}

export { KeyAuthorizations };
