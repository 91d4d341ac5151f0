import net from 'node:net';
import dns from 'node:dns';
import os from 'node:os';
import type { NetworkPolicyInput } from './schemas.ts';

/** The address policy in force for one tenant, every field decided. */
export interface NetworkPolicy {
  allowLoopback: boolean;
  allowLinkLocal: boolean;
  allowPrivate: boolean;
  allowCidrs: string[];
  denyCidrs: string[];
}

export const DEFAULT_POLICY: NetworkPolicy = { allowLoopback: false, allowLinkLocal: false, allowPrivate: true, allowCidrs: [], denyCidrs: [] };

export function mergePolicy(...layers: (NetworkPolicyInput | undefined)[]): NetworkPolicy {
  const out: NetworkPolicy = { ...DEFAULT_POLICY, allowCidrs: [], denyCidrs: [] };
  for (const l of layers) {
    if (!l) continue;
    if (l.allowLoopback !== undefined) out.allowLoopback = l.allowLoopback;
    if (l.allowLinkLocal !== undefined) out.allowLinkLocal = l.allowLinkLocal;
    if (l.allowPrivate !== undefined) out.allowPrivate = l.allowPrivate;
    if (l.allowCidrs) out.allowCidrs.push(...l.allowCidrs);
    if (l.denyCidrs) out.denyCidrs.push(...l.denyCidrs);
  }
  return out;
}

function blockList(cidrs: string[]): net.BlockList {
  const bl = new net.BlockList();
  for (const c of cidrs) {
    const [addr, bits] = c.split('/');
    const type = net.isIPv6(addr ?? '') ? 'ipv6' : 'ipv4';
    if (!addr || !net.isIP(addr)) throw new Error(`not a CIDR: ${c}`);
    if (bits === undefined) bl.addAddress(addr, type);
    else bl.addSubnet(addr, Number(bits), type);
  }
  return bl;
}

/** Config validation: a typo in a CIDR stops the start instead of failing every delivery. */
export function isCidr(c: string): boolean {
  try {
    blockList([c]);
    return true;
  } catch {
    return false;
  }
}

/**
 * The fixed address lists, built at the first check rather than at import: building them (the
 * block lists and Node's IP parsing behind them) took 15-40 ms of every start and of every
 * `sovcomms webhook` command on the 2-core VM, which check no address.
 */
function buildFixedLists() {
  // Never a webhook target, whatever the policy: "this host" (RFC 1122 §3.2.1.3), multicast, broadcast, reserved.
  const ALWAYS_REFUSED = blockList(['0.0.0.0/8', '224.0.0.0/4', '240.0.0.0/4', '::/128', 'ff00::/8']);
  /**
   * Special-purpose ranges (RFC 6890 registries) no real receiver lives in: documentation (RFC 5737,
   * RFC 3849), benchmarking (RFC 2544), IETF protocol assignments, the deprecated 6to4 relay anycast,
   * IPv6 discard (RFC 6666); and the translation and tunnel prefixes that embed an IPv4 address
   * (NAT64 RFC 6052/8215, 6to4 RFC 3056, Teredo RFC 4380), which could carry a delivery to a
   * loopback or LAN address the checks above would refuse in its plain form.
   */
  const RESERVED = blockList([
    '192.0.2.0/24',
    '198.51.100.0/24',
    '203.0.113.0/24',
    '2001:db8::/32',
    '198.18.0.0/15',
    '192.0.0.0/24',
    '192.88.99.0/24',
    '100::/64',
    '64:ff9b::/96',
    '64:ff9b:1::/48',
    '2002::/16',
    '2001::/32',
  ]);
  /**
   * IPv4-compatible (`::a.b.c.d`, ::/96, deprecated by RFC 4291 §2.5.5.1) and IPv4-translated
   * (`::ffff:0:a.b.c.d`, ::ffff:0:0/96, RFC 2765 §2.1) addresses. Linux treats neither as the IPv4
   * address inside (`[::127.0.0.1]` is not loopback): the packet goes to the default route, off
   * this machine. No receiver lives there, so they are refused whatever the policy says; `::` and
   * `::1`, which lie inside ::/96, keep their own rules.
   */
  const IPV4_EMBEDDED = blockList(['::/96', '::ffff:0:0:0/96']);
  // Cloud instance-metadata services (AWS/GCP/Azure/OpenStack, AWS IPv6, ECS task metadata, Alibaba).
  const METADATA = blockList(['169.254.169.254/32', 'fd00:ec2::254/128', '169.254.170.2/32', '100.100.100.200/32']);
  const LOOPBACK = blockList(['127.0.0.0/8', '::1/128']);
  const LINK_LOCAL = blockList(['169.254.0.0/16', 'fe80::/10']);
  // RFC 1918, RFC 6598 shared address space, RFC 4193 unique local.
  const PRIVATE = blockList(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7']);
  return { ALWAYS_REFUSED, RESERVED, IPV4_EMBEDDED, METADATA, LOOPBACK, LINK_LOCAL, PRIVATE };
}
let fixed: ReturnType<typeof buildFixedLists> | undefined;
const fixedLists = () => (fixed ??= buildFixedLists());

/**
 * This machine's own interface addresses (re-read at most once a minute: DHCP, VPNs): a webhook
 * must not call back into the appliance's own API or the other services on this host through
 * its LAN address, which the private-network allowance would otherwise let through.
 */
let own: { at: number; list: net.BlockList } | undefined;
function ownAddresses(now = performance.now()): net.BlockList {
  if (own && now - own.at < 60_000) return own.list;
  const list = new net.BlockList();
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) {
      if (a.internal) continue; // loopback: its own rule (allowLoopback)
      const { address, family } = normalizeAddress(a.address.split('%')[0]!);
      list.addAddress(address, family === 4 ? 'ipv4' : 'ipv6');
    }
  }
  own = { at: now, list };
  return list;
}

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is checked as the IPv4 address it reaches. */
export function normalizeAddress(address: string): { address: string; family: 4 | 6 } {
  const lower = address.toLowerCase().replace(/^\[|\]$/g, '');
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (m) return { address: m[1]!, family: 4 };
  const family = net.isIP(lower);
  if (!family) throw new Error(`not an IP address: ${address}`);
  return { address: lower, family: family as 4 | 6 };
}

/** Why an address is refused under `policy`, or null when it may be connected to. */
export function refusal(address: string, policy: NetworkPolicy): string | null {
  const { address: a, family } = normalizeAddress(address);
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const { ALWAYS_REFUSED, RESERVED, IPV4_EMBEDDED, METADATA, LOOPBACK, LINK_LOCAL, PRIVATE } = fixedLists();
  if (type === 'ipv6' && IPV4_EMBEDDED.check(a, type) && !ALWAYS_REFUSED.check(a, type) && !LOOPBACK.check(a, type))
    return `${a} is an IPv4-compatible or IPv4-translated address`;
  if (policy.denyCidrs.length && blockList(policy.denyCidrs).check(a, type)) return `${a} is in the tenant's deny list`;
  if (policy.allowCidrs.length && blockList(policy.allowCidrs).check(a, type)) return null;
  if (ALWAYS_REFUSED.check(a, type)) return `${a} is an unspecified, multicast or reserved address`;
  if (RESERVED.check(a, type)) return `${a} is in a special-purpose (documentation, benchmarking or translation) range`;
  if (METADATA.check(a, type)) return `${a} is a cloud metadata address`;
  if (ownAddresses().check(a, type)) return `${a} is an address of this appliance`;
  if (LOOPBACK.check(a, type)) return policy.allowLoopback ? null : `${a} is a loopback address`;
  if (LINK_LOCAL.check(a, type)) return policy.allowLinkLocal ? null : `${a} is a link-local address`;
  if (PRIVATE.check(a, type)) return policy.allowPrivate ? null : `${a} is a private network address`;
  return null;
}

/**
 * Whether an allowed address is on the office's side rather than the internet: loopback,
 * link-local, a private range or another special-purpose one, let through by a class allowance
 * (`allowPrivate`, the default, `allowLoopback`, `allowLinkLocal`). What such a target answers,
 * and how fast, maps the LAN, so a tenant is told only delivered or failed (service.ts). An
 * address the operator named in `allowCidrs` is a sanctioned receiver and is not internal.
 */
export function isInternal(address: string, policy: NetworkPolicy): boolean {
  const { address: a, family } = normalizeAddress(address);
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (policy.allowCidrs.length && blockList(policy.allowCidrs).check(a, type)) return false;
  const { ALWAYS_REFUSED, RESERVED, IPV4_EMBEDDED, METADATA, LOOPBACK, LINK_LOCAL, PRIVATE } = fixedLists();
  return [LOOPBACK, LINK_LOCAL, PRIVATE, RESERVED, METADATA, ALWAYS_REFUSED, IPV4_EMBEDDED].some((l) => l.check(a, type)) || ownAddresses().check(a, type);
}

export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (host) => dns.promises.lookup(host, { all: true, verbatim: true });

export class AddressRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AddressRefused';
  }
}

/**
 * A resolver that remembers each name's answer for `ttlMs` (by `now`, the service's clock). It
 * only saves the lookup: callers still check every address against the policy on every use
 * (resolveAllowed) and connect to the checked address, so a cached answer can never carry a
 * delivery to an address the policy refuses now; a rebinding name is seen at the latest `ttlMs`
 * later. Only non-empty answers are kept; a failed lookup is asked again next time. 0 disables it.
 */
export function cachingResolver(resolve: Resolver, ttlMs: number, now: () => number, maxNames = 1000): Resolver {
  if (ttlMs <= 0) return resolve;
  const cache = new Map<string, { at: number; addrs: { address: string; family: number }[] }>();
  return async (host) => {
    const t = now();
    const hit = cache.get(host);
    if (hit && t - hit.at < ttlMs && t >= hit.at) return hit.addrs;
    const addrs = await resolve(host);
    if (addrs.length) {
      if (cache.size >= maxNames) cache.clear();
      cache.set(host, { at: t, addrs });
    }
    return addrs;
  };
}

/**
 * Verdicts per policy object and address: the check builds socket addresses and walks several
 * block lists, and the sender asks it on every attempt for the same few addresses. Keyed by the
 * policy object (treated as immutable; mergePolicy always makes a new one), so a changed policy
 * is never answered from an old verdict.
 */
interface Verdict {
  why: string | null;
  norm: { address: string; family: 4 | 6; internal: boolean } | null;
}
const verdicts = new WeakMap<NetworkPolicy, Map<string, Verdict>>();

function verdict(address: string, policy: NetworkPolicy): Verdict {
  let m = verdicts.get(policy);
  if (!m) verdicts.set(policy, (m = new Map<string, Verdict>()));
  let v = m.get(address);
  if (!v) {
    const why = refusal(address, policy);
    v = { why, norm: why ? null : { ...normalizeAddress(address), internal: isInternal(address, policy) } };
    if (m.size >= 1000) m.clear();
    m.set(address, v);
  }
  return v;
}

/**
 * Resolves a URL's host and keeps the addresses the policy allows, in resolver order. The sender
 * connects to exactly these addresses (no second lookup), so DNS rebinding between check and
 * connect is impossible.
 */
export async function resolveAllowed(
  url: URL,
  policy: NetworkPolicy,
  resolve: Resolver = systemResolver,
): Promise<{ address: string; family: 4 | 6; internal: boolean }[]> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addrs = net.isIP(host) ? [{ address: host, family: net.isIP(host) }] : await resolve(host);
  if (!addrs.length) throw new Error(`${host} did not resolve`);
  const reasons: string[] = [];
  const allowed: { address: string; family: 4 | 6; internal: boolean }[] = [];
  for (const a of addrs) {
    const v = verdict(a.address, policy);
    if (v.why) reasons.push(v.why);
    else allowed.push({ ...v.norm! });
  }
  if (!allowed.length) throw new AddressRefused(`address refused for ${host}: ${[...new Set(reasons)].join('; ')}`);
  return allowed;
}

/** The first allowed address (see resolveAllowed). */
export async function resolveChecked(
  url: URL,
  policy: NetworkPolicy,
  resolve: Resolver = systemResolver,
): Promise<{ address: string; family: 4 | 6; internal: boolean }> {
  return (await resolveAllowed(url, policy, resolve))[0]!;
}
