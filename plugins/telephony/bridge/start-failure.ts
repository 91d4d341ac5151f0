/**
 * Why the bridge could not start, told to whoever started it (CONTROL-API.md "Start"): a
 * `bridge-failed` line on stdout and over IPC, like `bridge-ready`, so the supervisor can say in one
 * log line what to change, instead of a stack trace followed by the same failure at every restart.
 */
import { z } from 'zod';
import { SipBindError } from './sip/transport.ts';

/** Exit status of a bridge that could not start (2: its options are invalid). */
export const EXIT_START_FAILED = 3;

export const BridgeFailedSchema = z.object({
  type: z.literal('bridge-failed'),
  /** sip_port_in_use, sip_port_denied, sip_address_unavailable, or start_failed. */
  reason: z.string().max(40),
  address: z.string().max(100).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  transport: z.enum(['udp', 'tcp', 'tls']).optional(),
  detail: z.string().max(300),
});
export type BridgeFailed = z.infer<typeof BridgeFailedSchema>;

const BIND_REASONS: Record<string, string> = {
  EADDRINUSE: 'sip_port_in_use',
  EACCES: 'sip_port_denied',
  EADDRNOTAVAIL: 'sip_address_unavailable',
};

/** The report for an error thrown by Bridge.start(). */
export function startFailure(err: unknown): BridgeFailed {
  if (err instanceof SipBindError) {
    return {
      type: 'bridge-failed',
      reason: BIND_REASONS[err.errno] ?? 'sip_bind_failed',
      address: err.address,
      port: err.port,
      transport: err.transport,
      detail: err.errno,
    };
  }
  const detail = err instanceof Error ? err.message : String(err);
  return { type: 'bridge-failed', reason: 'start_failed', detail: detail.slice(0, 300) };
}

/**
 * One sentence naming the address, the port and the settings to change. `settings` names them as
 * the reader knows them: the core's config keys for the embedded bridge, the environment variables
 * for a bridge run on its own.
 */
export function describeFailure(f: BridgeFailed, settings: { port: string; host: string }): string {
  const where = f.address !== undefined && f.port !== undefined ? `${f.address.includes(':') ? `[${f.address}]` : f.address}:${f.port}` : '';
  const proto = f.transport ? ` (${f.transport.toUpperCase()})` : '';
  switch (f.reason) {
    case 'sip_port_in_use':
      return `SIP port ${where}${proto} is already in use by another program (another appliance or PBX?): stop it, or set ${settings.port} (or ${settings.host}) to a free port or address`;
    case 'sip_port_denied':
      return `SIP port ${where}${proto} may not be opened by this user (ports below 1024 need CAP_NET_BIND_SERVICE): set ${settings.port} to 1024 or above, or grant the capability`;
    case 'sip_address_unavailable':
      return `SIP address ${where}${proto} is not an address of this machine: set ${settings.host} to one of its addresses (or 0.0.0.0)`;
    case 'sip_bind_failed':
      return `SIP port ${where}${proto} could not be opened (${f.detail}): check ${settings.port} and ${settings.host}`;
    default:
      return `the telephony bridge could not start: ${f.detail}`;
  }
}
