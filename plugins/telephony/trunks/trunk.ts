/**
 * A SIP trunk, once: what an admin enters (`trunkInput`), the row it is stored as (`TrunkRow`,
 * table tel_trunks), what an admin sees (`trunkView`) and what the bridge gets (`toContract`,
 * control.ts `Trunk`). A new trunk option is a field in each of these, here, plus its column
 * (a migration), its use in the bridge, and the console form (README "A new trunk option").
 */
import { z } from 'zod';
import { CODECS, SRTP_POLICIES, TlsCaPemSchema, TRANSPORTS, type Codec, type Trunk } from '../control.ts';

export const TRUNK_ID_RE = /^[a-z0-9][a-z0-9_-]{0,39}$/;
export const trunkInput = z.object({
  id: z.string().regex(TRUNK_ID_RE, 'lower-case letters, digits, _ and -, at most 40').optional(),
  name: z.string().min(1).max(100),
  host: z
    .string()
    .min(1)
    .max(253)
    .regex(/^[A-Za-z0-9.:[\]-]+$/, 'a host name or IP address'),
  port: z.number().int().min(1).max(65535).optional().describe('default 5060, 5061 for tls (RFC 3261 §19.1.2)'),
  transport: z.enum(TRANSPORTS).default('udp'),
  username: z.string().max(200).default(''),
  /** Write-only: sealed at rest, never returned. Omitted on update = keep the stored one. */
  password: z.string().max(200).optional(),
  register: z.boolean().default(false),
  fromDomain: z.string().max(253).default(''),
  callerId: z.string().max(64).default(''),
  maxConcurrentCalls: z.number().int().min(1).max(1000).default(10),
  codecs: z
    .array(z.enum(CODECS))
    .min(1)
    // Each at most once: a repeated law would be offered twice in the SDP. The bridge's
    // other limits are checked with its own TrunkSchema (toContract) when the trunk is saved.
    .refine((c) => new Set(c).size === c.length, 'each codec at most once')
    .default([...CODECS]),
  dnsSrv: z.boolean().default(false).describe('locate the server by DNS SRV _sip._udp|_tcp.<host> (RFC 3263); port is the fallback'),
  inboundAuth: z
    .enum(['address', 'digest'])
    .default('address')
    .describe("how the trunk's inbound INVITEs are recognised: by source address (the host) or by digest with the trunk's username/password"),
  srtp: z
    .enum(SRTP_POLICIES)
    .default('off')
    .describe('SRTP keyed by SDES (RFC 4568) on its calls: required (RTP/SAVP, refused without), optional (used when the trunk takes it), off'),
  tlsCaPem: TlsCaPemSchema.or(z.literal(''))
    .default('')
    .describe("tls: PEM of the CA the trunk's server certificate must chain to; empty: the system CA store"),
});
export type TrunkInput = z.infer<typeof trunkInput>;

/** What an admin sees of a trunk (`?trunks=list|save`): never the password, only whether one is set. */
export const trunkViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  host: z.string(),
  port: z.number().int(),
  transport: z.enum(TRANSPORTS),
  username: z.string(),
  hasPassword: z.boolean(),
  register: z.boolean(),
  fromDomain: z.string(),
  callerId: z.string(),
  maxConcurrentCalls: z.number().int(),
  codecs: z.array(z.string()),
  dnsSrv: z.boolean(),
  inboundAuth: z.enum(['address', 'digest']),
  srtp: z.enum(SRTP_POLICIES),
  tlsCaPem: z.string(),
  registered: z.boolean().nullable().describe('from the bridge /health; null when unknown or not registering'),
  lastError: z.string().nullable(),
});

/** A trunk's settings as an admin gives and sees them (the password aside: it is write-only). */
export type TrunkSettings = Omit<TrunkInput, 'id' | 'password' | 'port'> & { id: string; port: number };

/** RFC 3261 §19.1.2: 5060 for UDP and TCP, 5061 for TLS. */
export function defaultPort(transport: TrunkInput['transport']): number {
  return transport === 'tls' ? 5061 : 5060;
}

/** tel_trunks (migrations 0001, 0002, 0004, 0006): booleans as 0/1, codecs as a JSON array. */
export interface TrunkRow {
  tenant_id: string;
  id: string;
  name: string;
  host: string;
  port: number;
  transport: (typeof TRANSPORTS)[number];
  username: string;
  password_sealed: string;
  register: number;
  from_domain: string;
  caller_id: string;
  max_concurrent_calls: number;
  codecs: string;
  dns_srv: number;
  inbound_auth: 'address' | 'digest';
  /** Migration 0007. */
  srtp: (typeof SRTP_POLICIES)[number];
  tls_ca_pem: string;
  created_at: string;
  updated_at: string;
}

/** The columns of a trunk that saveTrunk writes (tenant and times are the repository's). */
export type TrunkColumns = Omit<TrunkRow, 'tenant_id' | 'created_at' | 'updated_at'>;

export function toRow(s: TrunkSettings, passwordSealed: string): TrunkColumns {
  return {
    id: s.id,
    name: s.name,
    host: s.host,
    port: s.port,
    transport: s.transport,
    username: s.username,
    password_sealed: passwordSealed,
    register: s.register ? 1 : 0,
    from_domain: s.fromDomain,
    caller_id: s.callerId,
    max_concurrent_calls: s.maxConcurrentCalls,
    codecs: JSON.stringify(s.codecs),
    dns_srv: s.dnsSrv ? 1 : 0,
    inbound_auth: s.inboundAuth,
    srtp: s.srtp,
    tls_ca_pem: s.tlsCaPem,
  };
}

export function fromRow(r: TrunkRow): TrunkSettings {
  return {
    id: r.id,
    name: r.name,
    host: r.host,
    port: r.port,
    transport: r.transport,
    username: r.username,
    register: r.register === 1,
    fromDomain: r.from_domain,
    callerId: r.caller_id,
    maxConcurrentCalls: r.max_concurrent_calls,
    // Written by saveTrunk from checked input; an older row the bridge refuses is refused alone (CONTROL-API.md).
    codecs: JSON.parse(r.codecs) as Codec[],
    dnsSrv: r.dns_srv === 1,
    inboundAuth: r.inbound_auth ?? 'address',
    srtp: r.srtp ?? 'off',
    tlsCaPem: r.tls_ca_pem ?? '',
  };
}

/**
 * The trunk as the bridge takes it (control.ts `Trunk`, id `<tenant-id>.<trunk-id>`): checked with
 * the bridge's TrunkSchema when an admin saves it (so the bridge never refuses what was accepted)
 * and pushed with PUT /trunks, the password in plaintext only on that loopback hop. Empty and
 * default values are left out, as an older bridge expects.
 */
export function toContract(tenantId: string, s: TrunkSettings, password: string | undefined): Trunk {
  return {
    id: bridgeTrunkId(tenantId, s.id),
    host: s.host,
    port: s.port,
    transport: s.transport,
    ...(s.username ? { username: s.username } : {}),
    ...(password ? { password } : {}),
    register: s.register,
    ...(s.fromDomain ? { fromDomain: s.fromDomain } : {}),
    ...(s.callerId ? { callerId: s.callerId } : {}),
    maxConcurrentCalls: s.maxConcurrentCalls,
    codecs: s.codecs,
    ...(s.dnsSrv ? { dnsSrv: true } : {}),
    ...(s.inboundAuth === 'digest' ? { inboundAuth: 'digest' as const } : {}),
    ...(s.srtp !== 'off' ? { srtp: s.srtp } : {}),
    ...(s.transport === 'tls' && s.tlsCaPem ? { tlsCaPem: s.tlsCaPem } : {}),
  };
}

export function trunkView(r: TrunkRow, status?: { registered: boolean | null; lastError: string | null }): z.infer<typeof trunkViewSchema> {
  return { ...fromRow(r), hasPassword: r.password_sealed !== '', registered: status?.registered ?? null, lastError: status?.lastError ?? null };
}

export function bridgeTrunkId(tenantId: string, trunkId: string): string {
  return `${tenantId}.${trunkId}`;
}

/** The tenant's own trunk id from the bridge's one, or '' when it belongs to another tenant. */
export function localTrunkId(tenantId: string, bridgeId: string | null | undefined): string {
  if (!bridgeId) return '';
  return bridgeId.startsWith(`${tenantId}.`) ? bridgeId.slice(tenantId.length + 1) : bridgeId.includes('.') ? '' : bridgeId;
}
