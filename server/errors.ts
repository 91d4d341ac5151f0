/**
 * Every error code the appliance answers with: a typed union, so a typo is a compile error, the
 * API description lists them, and clients can rely on the set. Add a code here before using it.
 */
export const ERROR_CODES = [
  // generic HTTP (one per status the router maps)
  'invalid_request',
  'not_found',
  'method_not_allowed',
  'payload_too_large',
  'unsupported_media_type',
  'rate_limited',
  'server_error',
  'plugin_unavailable',
  'login_required',
  'invalid_csrf',
  'conflict',
  /** 409: a per-tenant cap (the body names it: `cap`, `limit`). */
  'tenant_limit',
  // credentials (RFC 6750, admin HMAC)
  'invalid_token',
  'insufficient_scope',
  'invalid_signature',
  'stale_signature',
  'replayed_signature',
  // OAuth 2.0 / OIDC (RFC 6749 §5.2, RFC 7591 §3.2.2, OIDC Core §3.1.2.6)
  'invalid_grant',
  'invalid_client',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'access_denied',
  'invalid_client_metadata',
  'invalid_redirect_uri',
  'interaction_required',
  'consent_required',
  'account_selection_required',
  'unsupported_response_type',
  'invalid_request_object',
  'request_not_supported',
  'request_uri_not_supported',
  'temporarily_unavailable',
  // accounts and tenants
  'weak_password',
  'duplicate_user',
  'duplicate_tenant',
  'cannot_remove_primary',
  'confirm_mismatch',
  'tenant_switch_not_allowed',
  'storage_full',
  'cannot_disable_self',
  'last_admin',
  'already_claimed',
  'already_revoked',
  'passkey_rejected',
  'invalid_key',
  // telephony
  'duplicate_route',
  'cannot_delete_catchall',
  'bridge_not_configured',
  'bridge_unreachable',
  'bridge_protocol',
  'bridge_error',
  'no_capacity',
  'room_unavailable',
  'duplicate_call',
  'not_whitelisted',
  'no_route',
  'no_trunk',
  'invalid_phone',
  'schedule_in_past',
  'trunk_in_use',
  // backups (server/backup)
  /** 400: an archive refused: wrong passphrase or recovery key, damaged, altered or truncated. */
  'invalid_archive',
  /** 409: a backup is already being made. */
  'backup_in_progress',
  /** 500-free failure of making a backup (disk full, target not writable): 503 with the reason. */
  'backup_failed',
  // webhooks
  'invalid_url',
  'address_refused',
  'invalid_origin',
  'too_many_subscriptions',
  'subscription_paused',
  'delivery_in_progress',
  /** 400: a webhook subscription names an event no plugin declares (the body lists `known`). */
  'unknown_event',
  // certificate authority and trusted lists
  'ca_unavailable',
  'ca_exists',
  'invalid_csr',
  'invalid_client_id',
  'hsm_error',
  'invalid_list',
  'import_failed',
  // chat
  'range_not_satisfiable',
  'upgrade_required',
  // wallet issuer (OpenID4VCI 1.0 §8.3.1.2; the seed's credential errors)
  'invalid_proof',
  'invalid_nonce',
  'unsupported_credential_type',
  'unsupported_proof_type',
  'unsupported_credential_format',
  'unknown_credential_configuration',
  'invalid_credential_request',
  'credential_request_denied',
  // wallet verifier (OpenID4VP)
  'mdoc_verify_not_configured',
  'invalid_presentation',
  'session_expired',
  'session_finished',
  'replayed_presentation',
  'duplicate_anchor',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * Why a generic code was answered: per code, the stable machine-readable `reason` values its error
 * body may carry next to `error` (snake_case, never changed, only added to). A client says the
 * cause in its own language from `error` + `reason` (and the safe parameters beside them, listed
 * in `ERROR_REASON_PARAMS`); `error_description` stays the English fallback. Listed per code in
 * /openapi.json (components.schemas.Error).
 */
export const ERROR_REASONS = {
  /** The wallet sign-in's answer (plugins/wallet-verifier): the link, or the PID's account. */
  access_denied: ['link_invalid', 'no_account'],
  not_found: ['account_inactive'],
  invalid_archive: ['wrong_key', 'truncated', 'tampered', 'unsupported_version', 'not_an_archive'],
  backup_failed: ['disk_full', 'not_writable', 'failed'],
  invalid_csr: ['not_pem', 'bad_signature'],
  invalid_key: ['not_a_key', 'not_public', 'unsupported_key'],
  hsm_error: [
    'module_unavailable',
    'token_not_found',
    'wrong_pin',
    'login_failed',
    'key_not_found',
    'ambiguous_key',
    'no_public_key',
    'unsupported_key',
    'session_closed',
    'sign_failed',
    'token_error',
  ],
  ca_unavailable: ['key_unreachable', 'key_mismatch', 'cannot_sign'],
  bridge_error: ['rejected', 'failed', 'unreadable'],
  passkey_rejected: [
    'challenge_expired',
    'unknown_credential',
    'account_inactive',
    'verification_failed',
    'no_registration',
    'registration_invalid',
    'registration_unverified',
  ],
  conflict: [
    'sip_user_taken',
    'prompt_exists',
    'too_many_tabs',
    'call_already_accepted',
    'call_answered_elsewhere',
    'pid_not_verified',
    'login_not_reviewed',
    'profile_exists',
    'message_deleted',
  ],
} as const satisfies Partial<Record<ErrorCode, readonly string[]>>;
export type ReasonedCode = keyof typeof ERROR_REASONS;
/** The reasons a code may carry (`never` for a code without listed reasons). */
export type ErrorReason<C extends ErrorCode> = C extends ReasonedCode ? (typeof ERROR_REASONS)[C][number] : never;

/**
 * The safe parameters a reason's body may carry beside it (all strings or numbers, never secrets,
 * paths or stack text), for a client to put into its sentence.
 */
export const ERROR_REASON_PARAMS: Record<string, { type: 'string' | 'number'; description: string }> = {
  field: { type: 'string', description: 'the refused request field (invalid_key, invalid_csr)' },
  name: { type: 'string', description: 'the conflicting name (a SIP user, a prompt slug, a network profile)' },
  limit: { type: 'number', description: 'the bound that was hit (too_many_tabs)' },
  operation: { type: 'string', description: 'bridge_error: the control request the bridge refused (`POST /calls`)' },
  bridge_status: { type: 'number', description: 'bridge_error: the HTTP status the bridge answered' },
  bridge_code: { type: 'string', description: "bridge_error: the bridge's own error code, when it gave one" },
};

/**
 * Business errors with stable codes (the jose / Backstage idea): services throw these, one error
 * middleware renders `{error, error_description}` with the status. No handler builds an error body.
 */
export class AppError<C extends ErrorCode = ErrorCode> extends Error {
  readonly status: number;
  /** ErrorCode, not C: an `instanceof` narrowing (AppError<any>) must not make the code `any`. */
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;
  /** Extra fields merged into the error body (e.g. `allowed` for 405, `reason`). Never secrets. */
  readonly extra: Record<string, unknown>;

  constructor(
    status: number,
    code: C,
    description: string,
    opts: {
      headers?: Record<string, string>;
      extra?: Record<string, unknown>;
      cause?: unknown;
      /** The stable cause (ERROR_REASONS of the code), with its safe parameters (ERROR_REASON_PARAMS). */
      reason?: ErrorReason<C>;
      params?: Record<string, string | number>;
    } = {},
  ) {
    super(description, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.headers = opts.headers ?? {};
    this.extra = { ...opts.extra, ...(opts.reason === undefined ? {} : { reason: opts.reason, ...opts.params }) };
  }

  /** The `reason` of the body, when the thrower named one. */
  get reason(): string | undefined {
    return typeof this.extra.reason === 'string' ? this.extra.reason : undefined;
  }
}

export class InputError extends AppError {
  constructor(description: string, code: ErrorCode = 'invalid_request', extra?: Record<string, unknown>) {
    super(400, code, description, { extra });
  }
}

export class NotFoundError extends AppError {
  constructor(description: string, code: ErrorCode = 'not_found') {
    super(404, code, description);
  }
}

export class ConflictError extends AppError {
  constructor(code: ErrorCode, description: string) {
    super(409, code, description);
  }
}

export class AuthenticationError extends AppError {
  constructor(description = 'authentication required', code: ErrorCode = 'invalid_token', realm = 'sovcomms') {
    super(401, code, description, { headers: { 'WWW-Authenticate': `Bearer realm="${realm}"` } });
  }
}

export class NotAllowedError extends AppError {
  constructor(description = 'insufficient privileges', code: ErrorCode = 'insufficient_scope') {
    super(403, code, description);
  }
}

export class RateLimitedError extends AppError {
  constructor(retryAfterSec: number) {
    super(429, 'rate_limited', `too many requests; retry after ${retryAfterSec} s`, {
      headers: { 'Retry-After': String(retryAfterSec) },
    });
  }
}

export class ServiceUnavailableError extends AppError {
  constructor(code: ErrorCode, description: string) {
    super(503, code, description);
  }
}

export class BadGatewayError extends AppError {
  constructor(code: ErrorCode, description: string) {
    super(502, code, description);
  }
}

/** Thrown by config loading; the CLI prints it and exits 1. */
export class ConfigError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`config ${path || '(root)'}: ${reason}`);
    this.name = 'ConfigError';
  }
}

/** Thrown when a migration fails or the database is from a newer version. */
export class MigrationError extends Error {
  constructor(
    readonly migration: string,
    message: string,
    opts?: { cause?: unknown },
  ) {
    super(`migration ${migration}: ${message}`, opts);
    this.name = 'MigrationError';
  }
}

/** One line for a schema failure: the first issue, with its path (`trunks.0.codecs: too big`). */
export function zodMessage(error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] }, prefix = ''): string {
  const issue = error.issues[0];
  if (!issue) return prefix ? `${prefix}: invalid` : 'invalid';
  const where = [prefix, issue.path.map(String).join('.')].filter(Boolean).join('.');
  return where ? `${where}: ${issue.message}` : issue.message;
}
