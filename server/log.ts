import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Paths pino removes from every log line. Requests are logged by id, method and path only, but
 * plugins log objects too: any key that looks like a credential is censored wherever it sits
 * (two levels deep covers `req.headers.authorization` and `body.password`).
 */
const SECRET_KEYS = [
  'authorization', 'cookie', 'set-cookie', 'x-service-admin-signature', 'password', 'passwd',
  'secret', 'client_secret', 'clientSecret', 'apiKey', 'api_key', 'token', 'access_token',
  'refresh_token', 'id_token', 'code_verifier', 'pin', 'privateKey', 'private_key', 'key',
  'masterKey', 'signingSecret', 'assertion', 'pre-authorized_code', 'code',
];

export const REDACT_PATHS = [
  ...SECRET_KEYS.map((k) => `["${k}"]`),
  ...SECRET_KEYS.map((k) => `*["${k}"]`),
  ...SECRET_KEYS.map((k) => `*.*["${k}"]`),
];

export function createLogger(opts: { level?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: undefined,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination ?? pino.destination({ dest: 2, sync: false }),
  );
}
