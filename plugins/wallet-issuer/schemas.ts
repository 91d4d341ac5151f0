import { z } from 'zod';

/** Settings under `plugins.wallet-issuer` in config.json. */
export const issuerConfig = z
  .object({
    /** ISO 3166-1 alpha-2 country of the IACA and document signer certificates (ISO 18013-5 Annex B). */
    country: z
      .string()
      .regex(/^[A-Z]{2}$/)
      .default('EU'),
    /** Display name of the issuer in the metadata (wallets show it). */
    displayName: z.string().min(1).max(100).default('Sovereign Communications'),
    locale: z.string().min(2).max(35).default('en'),
    /** How long an issued credential is valid. */
    credentialTtlDays: z.number().int().min(1).max(3650).default(365),
    /** Credential access token lifetime (spec: typically 1 hour). */
    accessTokenTtlSec: z.number().int().min(30).max(86_400).default(3600),
    /** Credentials one access token may obtain in all (a leaked token's reach). */
    credentialsPerToken: z.number().int().min(1).max(100).default(10),
    /** c_nonce lifetime (token response and Nonce Endpoint). */
    cNonceTtlSec: z.number().int().min(10).max(3600).default(300),
    /** Default and longest offer lifetime. */
    offerTtlSec: z
      .number()
      .int()
      .min(60)
      .max(30 * 86_400)
      .default(86_400),
    maxOfferTtlSec: z
      .number()
      .int()
      .min(60)
      .max(90 * 86_400)
      .default(30 * 86_400),
    /** Authorization code and pushed request lifetimes (RFC 9126 §2.2: short). */
    codeTtlSec: z.number().int().min(10).max(600).default(60),
    parTtlSec: z.number().int().min(10).max(600).default(90),
    /** How long a person has to sign in at the authorization step (the OpenID Provider's pages). */
    signInTtlSec: z.number().int().min(60).max(3600).default(600),
    /** Wrong tx_codes before a pre-authorized code is burnt. */
    txCodeMaxFailures: z.number().int().min(1).max(20).default(5),
    /** Per-IP limits of the public credential, offer and token endpoints (429 + Retry-After). */
    credentialPerMinute: z.number().int().min(1).default(60),
    offerPerMinute: z.number().int().min(1).default(60),
    tokenPerMinute: z.number().int().min(1).default(60),
    /** A retired signing key stays published this long after a rotation (longer than credentials live). */
    rotationOverlapDays: z.number().int().min(1).max(3650).default(400),
    /** Status list token: `ttl` claim and lifetime (draft-ietf-oauth-status-list §5.1). */
    statusListTtlSec: z.number().int().min(10).max(86_400).default(300),
    /** Entries per status list (bits=1); a new list starts when one is full. */
    statusListSize: z.number().int().min(8).max(1_048_576).default(131_072),
    /** The one client_id written to a new wallet-clients.json (and used when the file is unusable). */
    defaultWalletClientId: z.string().min(1).max(200).default('wallet-dev'),
  })
  .strict();
export type IssuerConfig = z.infer<typeof issuerConfig>;

/** The two credential configurations the issuer offers (OpenID4VCI 1.0 §12.2.4). */
export const SD_JWT_CONFIG_ID = 'eu.europa.ec.eudi.pid.1.sd-jwt';
export const MDOC_CONFIG_ID = 'eu.europa.ec.eudi.pid.1.mdoc';
export const PID_VCT = 'urn:eudi:pid:1';
export const PID_DOCTYPE = 'eu.europa.ec.eudi.pid.1';
export const CONFIG_IDS = [SD_JWT_CONFIG_ID, MDOC_CONFIG_ID] as const;
export type ConfigId = (typeof CONFIG_IDS)[number];
export const PRE_AUTH_GRANT = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';

/**
 * Subject claims of a PID-shaped credential (EU PID Rulebook names). Known names are typed; a
 * few more scalar claims are allowed for staff or visitor credentials.
 */
const scalar = z.union([z.string().max(500), z.number(), z.boolean()]);
export const subjectClaims = z
  .object({
    family_name: z.string().min(1).max(200),
    given_name: z.string().min(1).max(200),
    birthdate: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}$/)
      .optional(),
    nationalities: z
      .array(z.string().regex(/^[A-Z]{2}$/))
      .max(10)
      .optional(),
    email: z.string().max(320).optional(),
    place_of_birth: z
      .object({ locality: z.string().max(200).optional(), country: z.string().max(2).optional() })
      .strict()
      .optional(),
    issuing_country: z
      .string()
      .regex(/^[A-Z]{2}$/)
      .optional(),
    issuing_authority: z.string().max(200).optional(),
  })
  .catchall(scalar)
  .refine((o) => Object.keys(o).length <= 40, 'at most 40 claims')
  .refine((o) => Object.keys(o).every((k) => /^[a-z][a-z0-9_]{0,63}$/.test(k)), 'claim names are lower-case identifiers');
export type SubjectClaims = z.infer<typeof subjectClaims>;

export const createOfferBody = z
  .object({
    /** Which credential(s): configuration ids or the short formats. Default: the SD-JWT PID. */
    credential_configuration_ids: z.array(z.enum(CONFIG_IDS)).min(1).max(2).optional(),
    format: z.enum(['dc+sd-jwt', 'mso_mdoc']).optional(),
    claims: subjectClaims,
    pre_authorized: z.boolean().default(true),
    /** true: the server makes a numeric code; a string of 4-8 digits: use it. Only with pre_authorized. */
    tx_code: z.union([z.boolean(), z.string().regex(/^\d{4,8}$/)]).optional(),
    expires_in: z.number().int().min(60).optional(),
    /**
     * Authorization code offers only: the account (login name) that alone may redeem the offer
     * by signing in. Without it any active account of the tenant that signs in may.
     */
    user: z.string().min(1).max(200).optional(),
  })
  .strict();
export type CreateOfferBody = z.infer<typeof createOfferBody>;

export const createOfferResponse = z.object({
  offer_id: z.string(),
  credential_offer_uri: z.string(),
  offer_uri: z.string(),
  qr_page: z.string(),
  credential_configuration_ids: z.array(z.string()),
  pre_authorized: z.boolean(),
  tx_code: z.string().optional(),
  expires_at: z.string(),
});

/** OpenID4VCI 1.0 §8.2 proof object (seed: `proof`), and the 1.0 `proofs` object. */
export const proofObject = z
  .object({
    proof_type: z.string().max(50).optional(),
    jwt: z.string().max(16_384).optional(),
    cwt: z.string().max(16_384).optional(),
  })
  .loose();
export const credentialBody = z
  .object({
    format: z.string().max(50).optional(),
    vct: z.string().max(200).optional(),
    doctype: z.string().max(200).optional(),
    credential_configuration_id: z.string().max(200).optional(),
    credential_identifier: z.string().max(200).optional(),
    proof: proofObject.optional(),
    proofs: z
      .object({
        jwt: z.array(z.string().max(16_384)).max(10).optional(),
        cwt: z.array(z.string().max(16_384)).max(10).optional(),
      })
      .loose()
      .optional(),
  })
  .loose();
export type CredentialBody = z.infer<typeof credentialBody>;

export const tokenForm = z
  .object({
    grant_type: z.string().max(200),
    code: z.string().max(500).optional(),
    redirect_uri: z.string().max(2000).optional(),
    code_verifier: z.string().max(500).optional(),
    client_id: z.string().max(200).optional(),
    'pre-authorized_code': z.string().max(500).optional(),
    tx_code: z.string().max(100).optional(),
    scope: z.string().max(1000).optional(),
    resource: z.string().max(2000).optional(),
    authorization_details: z.string().max(8000).optional(),
  })
  .loose();
export type IssuerTokenForm = z.infer<typeof tokenForm>;

export const parForm = z
  .object({
    response_type: z.string().max(50),
    client_id: z.string().min(1).max(200),
    redirect_uri: z.string().min(1).max(2000),
    code_challenge: z.string().min(43).max(128).optional(),
    code_challenge_method: z.string().max(20).optional(),
    state: z.string().max(2000).optional(),
    scope: z.string().max(1000).optional(),
    issuer_state: z.string().max(500).optional(),
    authorization_details: z.string().max(8000).optional(),
    request_uri: z.string().max(2000).optional(),
  })
  .loose();
export type ParForm = z.infer<typeof parForm>;

export const revokeBody = z
  .object({
    credential_id: z.string().min(1).max(100).optional(),
    offer_id: z.string().min(1).max(100).optional(),
  })
  .strict()
  .refine((b) => (b.credential_id === undefined) !== (b.offer_id === undefined), 'exactly one of credential_id or offer_id');

export const revokeResponse = z.object({ revoked: z.array(z.string()) });
