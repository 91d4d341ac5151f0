import { z } from 'zod';
import { pageQuery } from '../../server/sdk.ts';
/**
 * Default certificate policy: an OID under the X.667 UUID arc (2.25.<uuid>), ours by
 * construction. An operator issuing under a published policy (an ETSI TS 119 411-8 policy of a
 * QTSP, or its own arc) sets `policyOid` and `cpsUrl`.
 */
export const DEFAULT_POLICY_OID = '2.25.148380328297153962395468305367553633917';

export const rpCaConfig = z
  .object({
    /** Policy OID in every issued certificate's certificatePolicies. */
    policyOid: z
      .string()
      .regex(/^[0-2](\.(0|[1-9]\d*))+$/, 'a dotted OID')
      .default(DEFAULT_POLICY_OID),
    /** CPS URI qualifier; default `<publicBaseUrl>/rp-cert.ashx?cps`. */
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
    cpsUrl: z.string().url().optional(),
    /** Base of the CPS and CRL addresses in certificates; default `https://<tenant host>`. */
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
    publicBaseUrl: z.string().url().optional(),
    /** Lifetime of a tenant's root. */
    caValidityYears: z.number().int().min(1).max(30).default(10),
    /** CRL nextUpdate distance; a new CRL is signed when half of it has passed or after a revocation. */
    crlValidityDays: z.number().int().min(1).max(90).default(7),
    tls: z
      .object({
        /** Lifetime of the appliance's HTTPS certificate. */
        validityDays: z.number().int().min(2).max(397).default(90),
        /** Renew when fewer days than this are left (or a third of the lifetime, if smaller). */
        renewBeforeDays: z.number().int().min(1).max(396).default(30),
        /** How often the renewal job looks (also notices new host names and LAN addresses). */
        checkIntervalMinutes: z.number().int().min(1).max(1440).default(360),
        /** Extra names for the certificate (DNS names or IP addresses). */
        extraNames: z.array(z.string().min(1).max(253)).default([]),
      })
      .strict()
      .default({ validityDays: 90, renewBeforeDays: 30, checkIntervalMinutes: 360, extraNames: [] }),
  })
  .strict();

export type RpCaConfig = z.infer<typeof rpCaConfig>;

export const caQuery = z.object({
  format: z.enum(['pem', 'der']).default('pem').describe('pem (application/x-pem-file, default) or der (application/pkix-cert)'),
});

const jwk = z.record(z.string(), z.unknown()).describe('public JWK (EC P-256/P-384 or RSA >= 2048)');

export const issueBody = z
  .object({
    client_id: z.string().min(1).max(260).describe('`x509_san_dns:<host>` or a bare DNS host name; it becomes the dNSName subjectAltName'),
    days: z.number().int().min(1).max(825).default(90).describe('validity in days (1..825, default 90)'),
    include_key: z.boolean().default(false).describe('return the private key of the key pair generated here (no csr/public_key) once; never stored'),
    csr: z.string().max(20_000).optional().describe('PKCS#10 request (PEM); its signature proves possession; only its key is used'),
    public_key: z
      .union([z.string().max(20_000), jwk])
      .optional()
      .describe('SubjectPublicKeyInfo PEM or public JWK'),
  })
  .strict();

export type IssueBody = z.infer<typeof issueBody>;

export const issueResponse = z.object({
  client_id: z.string().describe('x509_san_dns client identifier for OpenID4VP'),
  x509_hash: z.string().describe('base64url(SHA-256(DER of the certificate)), no padding'),
  x509_hash_client_id: z.string().describe('`x509_hash:` client identifier for OpenID4VP'),
  serial: z.string().describe('lower-case hex'),
  not_before: z.string(),
  not_after: z.string(),
  certificate: z.string().describe('PEM'),
  chain: z.array(z.string()).describe('PEM certificates, leaf first, ending with the CA'),
  x5c: z.array(z.string()).describe("base64 DER, leaf only (the CA is the wallet's trust anchor)"),
  private_key: z.string().optional().describe('PKCS#8 PEM; only with include_key, shown once'),
});

export const certStatus = z.enum(['valid', 'expired', 'revoked', 'superseded']);

export const certItem = z.object({
  serial: z.string(),
  client_id: z.string(),
  purpose: z.enum(['rp', 'tls']),
  subject: z.string(),
  names: z.array(z.string()),
  not_before: z.string(),
  not_after: z.string(),
  x509_hash: z.string(),
  key_source: z.enum(['generated', 'csr', 'public_key']),
  status: certStatus.describe('superseded: issued by a CA this tenant has since replaced'),
  revoked_at: z.string().nullable(),
  revocation_reason: z.string().nullable(),
  issued_by: z.string(),
  created_at: z.string(),
});

export const listQuery = pageQuery.extend({
  purpose: z.enum(['rp', 'tls']).optional(),
});

export const certQuery = z.object({
  cert: z.string().optional(),
  serial: z.string().min(1).max(64).describe('hex, colons and case ignored'),
});

/** RFC 5280 §5.3.1 CRLReason; certificateHold and removeFromCRL are left out: revocation here is final. */
export const REVOCATION_REASONS = {
  unspecified: 0,
  keyCompromise: 1,
  cACompromise: 2,
  affiliationChanged: 3,
  superseded: 4,
  cessationOfOperation: 5,
  privilegeWithdrawn: 9,
} as const;

export const revokeBody = z
  .object({
    serial: z.string().min(1).max(64).describe('hex, colons and case ignored'),
    reason: z.enum(Object.keys(REVOCATION_REASONS) as [keyof typeof REVOCATION_REASONS, ...(keyof typeof REVOCATION_REASONS)[]]).default('unspecified'),
  })
  .strict();

export const caState = z.object({
  initialized: z.boolean().describe('false until the first certificate or `sovcomms ca init`: the CA is then made with a software key'),
  key_store: z.enum(['software', 'hsm']).optional(),
  key_location: z.string().optional().describe('software (sealed in the database) or the HSM module, token and key label'),
  key_ready: z.boolean().optional().describe('the key opened just now: HSM reachable, PIN right, key matching the certificate'),
  key_problem: z.string().optional().describe('why the key did not open (only when key_ready is false)'),
  subject: z.string().optional(),
  not_before: z.string().optional(),
  not_after: z.string().optional(),
  fingerprint_sha256: z.string().optional(),
  generation: z.number().int().optional().describe("how many times this tenant's CA was replaced (`ca init --force`), from 1"),
  issued: z.number().int().optional(),
  revoked: z.number().int().optional(),
  crl_number: z.number().int().optional(),
});

export const revokeResponse = z.object({ serial: z.string(), status: z.literal('revoked'), revoked_at: z.string(), revocation_reason: z.string() });
