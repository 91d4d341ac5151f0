import fs from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  hostname: string;
  cpuModel: string;
  cores: number;
  ramGiB: number;
  node: string;
  os: string;
  arch: string;
  /** 1, 5 and 15 minute load averages when the run started: a busy machine explains noise. */
  loadavg: number[];
}

function osName(): string {
  try {
    const rel = fs.readFileSync('/etc/os-release', 'utf8');
    const pretty = /^PRETTY_NAME="?([^"\n]+)"?/m.exec(rel)?.[1];
    if (pretty) return `${pretty} (${os.type()} ${os.release()})`;
  } catch {
    // Not Linux, or no os-release: the kernel's name will do.
  }
  return `${os.type()} ${os.release()}`;
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    hostname: os.hostname(),
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    ramGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: osName(),
    arch: os.arch(),
    loadavg: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}
