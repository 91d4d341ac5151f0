import { z } from 'zod';

export const verifierConfig = z
  .object({
    /** Lifetime of a presentation session (vp-start to vp-response). */
    sessionTtlSeconds: z.number().int().min(30).max(3600).default(300),
    /** Validity of the verifier access certificate the RP CA issues. */
    certDays: z.number().int().min(2).max(825).default(90),
    /** Renew the certificate when fewer days than this are left (or a third of its life). */
    renewBeforeDays: z.number().int().min(1).max(824).default(30),
    /** Accepted distance of a KB-JWT iat from now. */
    iatWindowSeconds: z.number().int().min(10).max(3600).default(300),
    /**
     * Token status lists: cache lifetime, download timeout, and what an unknown status does (no
     * list could be fetched and no copy within its `exp` is cached): `refuse` (default) or
     * `accept`; `tenants` overrides it per tenant host name.
     */
    statusList: z
      .object({
        ttlSeconds: z.number().int().min(0).default(3600),
        timeoutMs: z.number().int().min(100).max(60_000).default(5000),
        unknown: z.enum(['refuse', 'accept']).default('refuse'),
        tenants: z.record(z.string(), z.object({ unknown: z.enum(['refuse', 'accept']).optional() }).strict()).default({}),
      })
      .strict()
      .default({ ttlSeconds: 3600, timeoutMs: 5000, unknown: 'refuse', tenants: {} }),
    /** Wallet sign-in policy (README "Wallet sign-in"); `tenants` overrides it per tenant host. */
    signIn: z
      .object({
        mode: z.enum(['off', 'match-user']).default('match-user'),
        usernameTemplate: z.string().min(1).max(200).default('{given_name}.{family_name}'),
        ttlSeconds: z.number().int().min(10).max(600).default(60),
        /** The DCQL preset the login page's wallet sign-in asks for. */
        preset: z.string().min(1).max(41).default('pid'),
        tenants: z
          .record(z.string(), z.object({ mode: z.enum(['off', 'match-user']).optional(), usernameTemplate: z.string().min(1).max(200).optional() }).strict())
          .default({}),
      })
      .strict()
      .default({ mode: 'match-user', usernameTemplate: '{given_name}.{family_name}', ttlSeconds: 60, preset: 'pid', tenants: {} }),
    /**
     * Refused responses a session takes before it ends (as `error`, check `too_many_responses`):
     * a refused one leaves the session waiting, since anyone who saw the QR code can post one.
     */
    maxRefusedResponses: z.number().int().min(1).max(100).default(5),
    /** Per-IP limit of the public verifier endpoints, per minute. */
    perIpPerMinute: z.number().int().min(1).default(60),
  })
  .strict();
export type VerifierConfig = z.infer<typeof verifierConfig>;

export const startQuery = z.object({
  action: z.literal('vp-start').optional(),
  preset: z.string().min(1).max(41).default('pid').describe('named DCQL preset (resources/dcql): pid, age_over_18, pid-network'),
  client_id_prefix: z.enum(['x509_hash', 'x509_san_dns']).default('x509_hash'),
  scope: z.string().max(200).default('openid').describe('`openid` or `openid network_access`'),
  network_profile: z.string().max(64).optional().describe('named network profile, used when scope includes network_access'),
  response_mode: z.enum(['direct_post.jwt', 'direct_post']).default('direct_post.jwt'),
});

export const vpStartResponse = z.object({
  session_id: z.string(),
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
  request_uri: z.string().url(),
  openid4vp_url: z.string(),
  expires_in: z.number().int(),
  client_id: z.string(),
  qr_page: z.string().describe('a page that renders openid4vp_url as a QR code'),
  result_key: z
    .string()
    .describe(
      'shown here only: send it as X-Sovcomms-Result-Key to vp-result to get the disclosed claims (the session id is in the QR code, so it alone gives the status only)',
    ),
});

export const sessionQuery = z.object({ action: z.string().optional(), session_id: z.string().min(1).max(64) });

export const vpResponseResult = z.object({
  status: z.enum(['completed', 'verified', 'error']),
  session_id: z.string(),
  presentation: z.record(z.string(), z.unknown()),
  network_config: z.record(z.string(), z.unknown()).optional(),
  sso_assertion: z.string().optional(),
  error: z.string().optional(),
  error_description: z.string().optional(),
  check: z.string().optional().describe('the verification check that failed'),
  redirect_uri: z.string().optional().describe('login-page sessions: where the wallet sends its user (OpenID4VP 1.0 §8.2), with a response_code'),
});

export const anchorAddBody = z.object({ pem: z.string().min(1).max(20_000) }).strict();
export const anchorRemoveBody = z.object({ sha256: z.string().min(1).max(100) }).strict();

/** Webhook event `presentation.verified`: which session and credential, never the person's claim values. */
export const presentationVerified = z
  .object({
    sessionId: z.string(),
    preset: z.string(),
    format: z.string(),
    clientId: z.string(),
    claimNames: z.array(z.string()),
  })
  .describe('A wallet presentation was verified: which session, client and credential format, and the names of the claims disclosed');

export const vpEventsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(50),
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
  since: z.string().datetime({ offset: true }).optional(),
});

export const profileAddBody = z
  .object({
    name: z.string().min(1).max(64),
    type: z.string().min(1).max(32).describe('wifi-wpa2-eap, wifi-wpa3-eap, wifi-wpa2-psk, wifi-hotspot20, apn-4g, apn-5g, openvpn, wireguard'),
    ssid: z.string().min(1).max(32).optional(),
    eap_method: z.string().max(16).optional().describe('PEAP, TTLS, TLS or MSCHAPv2'),
    identity_template: z.string().max(200).optional().describe('text with {claim} placeholders, default {given_name}.{family_name}@{host}'),
    ttl_minutes: z.number().int().min(1).max(10_080).optional(),
  })
  .strict();
export const profileRemoveBody = z.object({ name: z.string().min(1).max(64) }).strict();

/** POST /oidc.ashx/wallet-login/start: the pending authorization the login page continues (`i`), if any. */
export const walletLoginStartBody = z.object({ i: z.string().max(64).optional() }).strict();

/** POST /oidc.ashx/wallet-login/complete. */
export const walletLoginCompleteBody = z.object({ session_id: z.string().min(1).max(64), login_secret: z.string().min(1).max(100) }).strict();

/** GET /oidc.ashx/wallet-login/return: the redirect_uri a login-page session's wallet follows. */
export const walletLoginReturnQuery = z.object({ session_id: z.string().min(1).max(64), response_code: z.string().min(1).max(100) });
