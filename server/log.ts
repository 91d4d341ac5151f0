import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Paths pino removes from every log line. Requests are logged by id, method and path only, but
 * plugins log objects too: any key that looks like a credential is censored wherever it sits
 * (two levels deep covers `req.headers.authorization` and `body.password`).
 */
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
  'pin',
  'privateKey',
  'private_key',
  'key',
  'masterKey',
  'signingSecret',
  'assertion',
  'pre-authorized_code',
  'code',
];

export const REDACT_PATHS = [...SECRET_KEYS.map((k) => `["${k}"]`), ...SECRET_KEYS.map((k) => `*["${k}"]`), ...SECRET_KEYS.map((k) => `*.*["${k}"]`)];

/**
 * Key names that hold credentials at any depth and in any spelling (`newPassword`,
 * `refresh_token`, `clientSecret`, `X-Service-Admin-Signature`). The paths above stop at three
 * levels and at exact names; a plugin logging `{ body }` of a nested form or a renamed field got
 * through, so every logged object is also walked (bounded) and such keys are censored.
 */
const SECRET_KEY_RE =
  /passw|passphrase|secret|token|authorization|cookie|api[-_]?key|signature|private[-_]?key|assertion|master[-_]?key|code[-_]?verifier|^(pin|code|key|otp|puk)$/i;
const MAX_DEPTH = 8;

function isPlain(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A copy of `v` with secret-named keys censored; the caller's object is never changed. */
export function censorSecrets(v: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) return '[too deep]';
  if (Array.isArray(v)) return v.map((x) => censorSecrets(x, depth + 1));
  if (!isPlain(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v))
    out[k] = SECRET_KEY_RE.test(k) && x !== undefined && x !== null && x !== '' ? '[redacted]' : censorSecrets(x, depth + 1);
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
