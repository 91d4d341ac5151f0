/** The address LAN devices reach this machine at (first non-internal IPv4, else IPv6). */
import os from 'node:os';

export function lanAddress(ifaces: NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces()): string | null {
  const all = Object.values(ifaces).flatMap((l) => l ?? []);
  const v4 = all.find((i) => !i.internal && i.family === 'IPv4');
  if (v4) return v4.address;
  const v6 = all.find((i) => !i.internal && i.family === 'IPv6' && !i.address.startsWith('fe80'));
  return v6 ? `[${v6.address}]` : null;
}
