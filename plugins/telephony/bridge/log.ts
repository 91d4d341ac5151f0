/**
 * One JSON line per event on stderr (stdout carries only the readiness line the supervisor
 * parses). Never log tokens, passwords, API keys or SIP Authorization headers.
 */
export function log(level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown> = {}): void {
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, name: 'telephony-bridge', msg, ...fields }) + '\n');
}
