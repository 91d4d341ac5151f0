import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Key names that hold a credential whatever object they sit in and however deep (`password`,
 * `newPassword`, `refresh_token`, `clientSecret`, `X-Service-Admin-Signature`, `tx_code`).
 */
const SECRET_NAME_RE =
  /passw|passphrase|secret|token|authorization|cookie|api[-_]?key|signature|private[-_]?key|assertion|master[-_]?key|code[-_]?verifier|pre[-_]?authori[sz]ed[-_]?code|tx[-_]?code|^(auth|device|user)[-_]?code$|^(otp|puk)$/i;

/**
 * Short names that are a credential only in what a client sent (an OAuth `code` in a form or a
 * query, a wallet's `pin`, a `key` in a body), and something else in the appliance's own fields: a
 * child's exit `code`, an error's `code`, the CA's `key` kind. They are censored under these
 * carriers only, by path, never by bare name (a bare `code` once hid the bridge's exit status).
 */
const REQUEST_DATA = ['body', 'query', 'form', 'params', 'headers', 'cookies'] as const;
const SHORT_SECRETS = ['code', 'key', 'pin', 'otp', 'puk'] as const;
const SHORT_SECRET_RE = /^(code|key|pin|otp|puk)$/i;

/** The names of SECRET_NAME_RE that are logged as such, for pino's own (fast) path redaction. */
const SECRET_KEYS = [
  'authorization',
  'cookie',
  'set-cookie',
  'x-service-admin-signature',
  'password',
  'passwd',
  'secret',
  'client_secret',
  'clientSecret',
  'apiKey',
  'api_key',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'code_verifier',
  'privateKey',
  'private_key',
  'masterKey',
  'signingSecret',
  'assertion',
  'pre-authorized_code',
  'tx_code',
];

/**
 * pino `redact` paths: the secret names at the top and two levels down (`req.headers.authorization`),
 * and the short names under the request carriers (`body.code`, `req.body.pin`, `query.code`,
 * `body.user.pin`). censorSecrets below covers what sits deeper.
 */
export const REDACT_PATHS = [
  ...SECRET_KEYS.flatMap((k) => [`["${k}"]`, `*["${k}"]`, `*.*["${k}"]`]),
  ...REQUEST_DATA.flatMap((c) => SHORT_SECRETS.flatMap((k) => [`${c}.${k}`, `*.${c}.${k}`, `${c}.*.${k}`])),
];
const MAX_DEPTH = 8;

function isPlain(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function present(x: unknown): boolean {
  return x !== undefined && x !== null && x !== '';
}

/**
 * A copy of `v` with secrets censored; the caller's object is never changed. A plugin logging a
 * nested form or a renamed field gets past fixed paths, so every logged object is also walked
 * (bounded): secret names anywhere, short names (`code`, `pin`...) below a request carrier.
 */
export function censorSecrets(v: unknown, depth = 0, inRequestData = false): unknown {
  if (depth > MAX_DEPTH) return '[too deep]';
  if (Array.isArray(v)) return v.map((x) => censorSecrets(x, depth + 1, inRequestData));
  if (!isPlain(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    const secret = SECRET_NAME_RE.test(k) || (inRequestData && SHORT_SECRET_RE.test(k));
    out[k] = secret && present(x) ? '[redacted]' : censorSecrets(x, depth + 1, inRequestData || (REQUEST_DATA as readonly string[]).includes(k));
  }
  return out;
}

export function createLogger(opts: { level?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: undefined,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { log: (obj) => censorSecrets(obj) as Record<string, unknown> },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination ?? pino.destination({ dest: 2, sync: false }),
  );
}
