/**
 * Business errors with stable codes (the jose / Backstage idea): services throw these, one error
 * middleware renders `{error, error_description}` with the status. No handler builds an error body.
 */
export class AppError extends Error {
  readonly status: number;
  readonly code: string;
  readonly headers: Record<string, string>;
  /** Extra fields merged into the error body (e.g. `allowed` for 405). Never secrets. */
  readonly extra: Record<string, unknown>;

  constructor(
    status: number,
    code: string,
    description: string,
    opts: { headers?: Record<string, string>; extra?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(description, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.headers = opts.headers ?? {};
    this.extra = opts.extra ?? {};
  }
}

export class InputError extends AppError {
  constructor(description: string, code = 'invalid_request', extra?: Record<string, unknown>) {
    super(400, code, description, { extra });
  }
}

export class NotFoundError extends AppError {
  constructor(description: string, code = 'not_found') {
    super(404, code, description);
  }
}

export class ConflictError extends AppError {
  constructor(code: string, description: string) {
    super(409, code, description);
  }
}

export class AuthenticationError extends AppError {
  constructor(description = 'authentication required', code = 'invalid_token', realm = 'sovcomms') {
    super(401, code, description, { headers: { 'WWW-Authenticate': `Bearer realm="${realm}"` } });
  }
}

export class NotAllowedError extends AppError {
  constructor(description = 'insufficient privileges', code = 'insufficient_scope') {
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
  constructor(code: string, description: string) {
    super(503, code, description);
  }
}

export class BadGatewayError extends AppError {
  constructor(code: string, description: string) {
    super(502, code, description);
  }
}

/** Thrown by config loading; the CLI prints it and exits 1. */
export class ConfigError extends Error {
  constructor(readonly path: string, readonly reason: string) {
    super(`config ${path || '(root)'}: ${reason}`);
    this.name = 'ConfigError';
  }
}

/** Thrown when a migration fails or the database is from a newer version. */
export class MigrationError extends Error {
  constructor(readonly migration: string, message: string, opts?: { cause?: unknown }) {
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
