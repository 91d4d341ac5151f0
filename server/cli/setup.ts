import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse, str, UsageError } from '../cli-args.ts';
import { defaultDataDir } from '../config.ts';
import type { CoreCommand } from './command.ts';
import type { CliIo } from './io.ts';

/** An address SIP may listen on: one of this machine's, or every interface (0.0.0.0, ::). */
export interface SipAddressChoice {
  address: string;
  label: string;
}

/**
 * The addresses offered for SIP: the machine's LAN addresses first (IPv4, then IPv6 without
 * link-local ones, which need a zone a phone cannot dial), then every interface, then loopback
 * (the appliance alone: no phone reaches it, the default until setup runs).
 */
export function sipAddressChoices(ifaces: NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces()): SipAddressChoice[] {
  const lan: SipAddressChoice[] = [];
  for (const [name, list] of Object.entries(ifaces)) {
    for (const i of list ?? []) {
      if (i.internal || (i.family === 'IPv6' && i.address.toLowerCase().startsWith('fe80'))) continue;
      lan.push({ address: i.address, label: `${name}, ${i.family}` });
    }
  }
  lan.sort((a, b) => Number(net.isIPv6(a.address)) - Number(net.isIPv6(b.address)));
  return [
    ...lan,
    { address: '0.0.0.0', label: 'every IPv4 interface' },
    { address: '127.0.0.1', label: 'this machine only: no desk phone or carrier reaches it' },
  ];
}

/** The settings file, read as the server reads it (an absent file is an empty object). */
function readConfigFile(file: string): Record<string, unknown> {
  if (!fs.existsSync(file)) return {};
  const parsed: unknown = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new UsageError(`${file} must hold a JSON object`);
  return parsed as Record<string, unknown>;
}

function section(o: Record<string, unknown>, key: string): Record<string, unknown> {
  const v = o[key];
  if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  const fresh: Record<string, unknown> = {};
  o[key] = fresh;
  return fresh;
}

/** Writes the file whole or not at all (a crash mid-write leaves the old one), readable by the owner only: it may hold the mail relay's password. */
function writeConfigFile(file: string, data: Record<string, unknown>): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(data, null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
}

async function askAddress(io: CliIo, choices: SipAddressChoice[]): Promise<string> {
  const ask = io.ask!;
  io.out('Which address should SIP (desk phones, carriers) listen on?');
  choices.forEach((c, i) => io.out(`  ${i + 1}) ${c.address}  (${c.label})`));
  for (;;) {
    const a = (await ask(`Address [1-${choices.length}, or type one]: `)).trim();
    const n = Number(a);
    if (Number.isInteger(n) && n >= 1 && n <= choices.length) return choices[n - 1]!.address;
    if (choices.some((c) => c.address === a)) return a;
    io.out(`Not one of the addresses above: ${a || '(nothing)'}`);
  }
}

/**
 * `sovcomms setup`: the first-run questions a LAN needs answered before a desk phone or a carrier
 * can reach the appliance (issue: out of the box the bridge listens on 127.0.0.1). Interactive on
 * a terminal, scriptable with flags; it writes `<data-dir>/config.json`, which a running server
 * reads at its next start.
 */
export const setupCommand: CoreCommand = {
  opens: 'nothing',
  summary: 'First-run setup: the address SIP listens on (desk phones, carriers)',
  usage: ['setup [--sip-host ADDR] [--sip-port 5060]   (asks on a terminal; give --sip-host to script it)'],
  changes: false,
  async run(args, io) {
    const { values } = parse(args, { 'sip-host': { type: 'string' }, 'sip-port': { type: 'string' } }, 0);
    const choices = sipAddressChoices();
    let host = str(values['sip-host']);
    if (host === undefined) {
      if (!io.ask) {
        throw new UsageError(`setup: not on a terminal: give --sip-host ADDR (this machine has ${choices.map((c) => c.address).join(', ')})`);
      }
      host = await askAddress(io, choices);
    }
    // The bridge binds it: an address of another machine would stop it at start.
    if (!choices.some((c) => c.address === host) && host !== '::') {
      throw new UsageError(`--sip-host: ${host} is not an address of this machine (${choices.map((c) => c.address).join(', ')}, ::)`);
    }
    let port: number | undefined;
    if (values['sip-port'] !== undefined) {
      port = Number(values['sip-port']);
      if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`--sip-port: not a port number: ${String(values['sip-port'])}`);
    }
    const file = path.join(path.resolve(str(values['data-dir']) ?? defaultDataDir()), 'config.json');
    let cfg: Record<string, unknown>;
    try {
      cfg = readConfigFile(file);
    } catch (e) {
      throw new UsageError(`setup: ${file} is not valid JSON: ${(e as Error).message}`);
    }
    const bridge = section(section(section(cfg, 'plugins'), 'telephony'), 'bridge');
    bridge.sipHost = host;
    if (port !== undefined) bridge.sipPort = port;
    writeConfigFile(file, cfg);
    const sipPort = typeof bridge.sipPort === 'number' ? bridge.sipPort : 5060;
    io.out(`SIP listens on ${host}:${sipPort} (UDP and TCP) from the next start (plugins.telephony.bridge.sipHost in ${file})`);
    const shown = host === '0.0.0.0' || host === '::' ? (choices[0]?.address ?? host) : host;
    io.out(`A desk phone registers as: server ${shown}, port ${sipPort}, transport UDP or TCP, user and password from "sovcomms phone add USER"`);
    return 0;
  },
};
