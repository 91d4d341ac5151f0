import { z } from 'zod';

/**
 * `plugins.discovery`: where and how to advertise. Whether to advertise at all is the core
 * setting `discovery` (true, false, or unset: on when `http.host` is not a loopback address).
 */
export const discoveryConfig = z
  .object({
    /** Instance name shown by browsers (default: the product name and this machine's host name). */
    name: z.string().min(1).max(63).optional(),
    /** IPv4 address of the interface to advertise on (default: every interface). */
    interface: z.ipv4().optional(),
    /** Address the mDNS socket binds (default: all; `224.0.0.251` keeps it to multicast traffic). */
    bind: z.ipv4().optional(),
    /** mDNS port (RFC 6762 §3: 5353; tests use another so they never meet a real LAN). */
    mdnsPort: z.number().int().min(1).max(65535).default(5353),
    /** Multicast TTL of the announcements (RFC 6762 §11: link-local, 255 on the wire). */
    ttl: z.number().int().min(1).max(255).default(255),
  })
  .strict()
  .prefault({});
export type DiscoveryConfig = z.infer<typeof discoveryConfig>;

/** One appliance found on the LAN. */
export interface FoundAppliance {
  name: string;
  host: string;
  port: number;
  addresses: string[];
  version: string;
  protocol: 'https' | 'http';
  console: string;
  api: string;
  oidc: string;
  tenants: string[];
}
