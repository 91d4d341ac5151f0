import { z } from 'zod';

/** Settings under `plugins.oidc` in config.json. */
export const oidcConfig = z
  .object({
    /** Access token lifetime (RFC 9068 JWT), seconds. */
    accessTokenTtl: z.number().int().min(60).max(86_400).default(3600),
    idTokenTtl: z.number().int().min(60).max(86_400).default(3600),
    refreshTokenTtl: z
      .number()
      .int()
      .min(300)
      .max(365 * 86_400)
      .default(30 * 86_400),
    codeTtl: z.number().int().min(10).max(600).default(60),
    sessionTtl: z
      .number()
      .int()
      .min(300)
      .max(90 * 86_400)
      .default(14 * 86_400),
    /** Default signing algorithm of access tokens (id_tokens follow the client, RS256 by default). */
    accessTokenAlg: z.enum(['ES256', 'RS256']).default('ES256'),
    /** Keys are rotated by `sovcomms oidc rotate-keys` or the admin surface; old keys stay published this long. */
    keyOverlapSeconds: z
      .number()
      .int()
      .min(3600)
      .default(2 * 86_400),
    /** Tenant-wide switch for PKCE `plain` (a client can switch it off for itself too). */
    allowPlainPkce: z.boolean().default(true),
    /** Sign-in attempts per IP per minute (password grant and the login page). */
    loginPerIpPerMinute: z.number().int().min(1).default(30),
    /** Failed sign-ins per account per minute before that account is rate limited. */
    loginFailuresPerAccountPerMinute: z.number().int().min(1).default(5),
    /** Past that budget the account is slowed, not locked: one attempt at a time, this far apart. */
    loginSlowdownMs: z.number().int().min(0).max(60_000).default(2000),
    /** Attempts that may wait in an account's slow lane; more answer 429. */
    /** Signing-key rotations per tenant per minute (each makes an RSA and an EC key pair). */
    keyRotationsPerMinute: z.number().int().min(1).max(600).default(10),
    loginSlowQueue: z.number().int().min(1).max(100).default(3),
    /** SMTP relay for magic links and recovery mail: a nodemailer URL (smtp://host:port). */
    smtp: z.object({ url: z.string(), from: z.string().default('no-reply@sovcomms.local') }).optional(),
    /** Per-tenant SMTP relays by tenant host (override `smtp`). */
    tenantSmtp: z.record(z.string(), z.object({ url: z.string(), from: z.string().default('no-reply@sovcomms.local') })).default({}),
  })
  .strict();
export type OidcConfig = z.infer<typeof oidcConfig>;

const opt = z.string().max(8192).optional();

/**
 * Fields of every token request whatever its grant: client authentication (RFC 6749 §2.3,
 * RFC 7523 §2.2) and the resource indicators (RFC 8707 `resource`, RFC 8693 `audience`), which are
 * accepted and bounded but not used.
 */
const COMMON_TOKEN_FIELDS = ['client_id', 'client_secret', 'client_assertion_type', 'client_assertion', 'resource', 'audience'];

/**
 * The token endpoint's form: grant_type and the fields the registered grants declare (each a
 * bounded string; a repeated parameter arrives as an array and is refused), composed once when
 * the routes are mounted.
 */
export function tokenFormSchema(grantFields: readonly string[]): z.ZodType<TokenForm> {
  const shape: Record<string, typeof opt> = {};
  for (const f of [...grantFields, ...COMMON_TOKEN_FIELDS]) shape[f] = opt;
  return z.object({ grant_type: z.string().max(200), ...shape }).loose() as z.ZodType<TokenForm>;
}

/** The token request as the form arrives (every field a bounded string). */
export type TokenForm = {
  grant_type: string;
  client_id?: string;
  client_secret?: string;
  client_assertion_type?: string;
  client_assertion?: string;
} & Record<string, string | undefined>;

export const tokenResponse = z
  .object({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.number(),
    scope: z.string().optional(),
    id_token: z.string().optional(),
    refresh_token: z.string().optional(),
  })
  .loose();

export const oauthError = z.object({ error: z.string(), error_description: z.string().optional(), error_uri: z.string().optional() });

export const discoverySchema = z
  .object({
    issuer: z.string(),
    authorization_endpoint: z.string(),
    token_endpoint: z.string(),
    userinfo_endpoint: z.string(),
    jwks_uri: z.string(),
    response_types_supported: z.array(z.string()),
    subject_types_supported: z.array(z.string()),
    id_token_signing_alg_values_supported: z.array(z.string()),
  })
  .loose();

export const jwksSchema = z.object({ keys: z.array(z.object({}).loose()) });

export const tokenOnlyForm = z
  .object({
    token: z.string().max(8192),
    token_type_hint: z.string().max(100).optional(),
    client_id: opt,
    client_secret: opt,
    client_assertion_type: opt,
    client_assertion: opt,
  })
  .loose();

export const introspection = z.object({ active: z.boolean() }).loose();

const authorizeFields = {
  response_type: opt,
  client_id: opt,
  redirect_uri: opt,
  scope: opt,
  state: opt,
  nonce: opt,
  prompt: opt,
  code_challenge: opt,
  code_challenge_method: opt,
  request: z.string().max(16_384).optional(),
  id_token_hint: opt,
  max_age: opt,
  response_mode: opt,
  login_hint: opt,
  ui_locales: opt,
  claims: opt,
};
export const authorizeParams = z.object(authorizeFields).loose();
export type AuthorizeParams = z.infer<typeof authorizeParams>;

export const logoutParams = z
  .object({
    id_token_hint: opt,
    post_logout_redirect_uri: opt,
    state: opt,
    client_id: opt,
    logout_hint: opt,
    ui_locales: opt,
  })
  .loose();
