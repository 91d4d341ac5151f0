import fs from 'node:fs';
import https from 'node:https';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';
import { parse, str, UsageError } from '../cli-args.ts';
import { TLS_AUTO } from '../core-services.ts';
import { BUILD } from '../build-info.ts';
import type { Appliance } from '../app.ts';
import type { CoreCommand } from './command.ts';
import { firstRunLines } from './open.ts';

export const serveCommand: CoreCommand = {
  opens: 'nothing',
  summary: 'Runs the appliance: HTTP(S) server, plugins, jobs',
  usage: ['serve [--host H] [--port P] [--tls-cert F --tls-key F | --tls auto]'],
  changes: false,
  async run(args, io) {
    const { values } = parse(
      args,
      {
        host: { type: 'string' },
        port: { type: 'string' },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        tls: { type: 'string' },
      },
      0,
    );
    const http: Record<string, unknown> = {};
    if (values.host) http.host = values.host;
    if (values.port !== undefined) {
      const p = Number(values.port);
      if (!Number.isInteger(p) || p < 0 || p > 65535) throw new UsageError(`--port: not a port number: ${values.port}`);
      http.port = p;
    }
    if (values['tls-cert'] || values['tls-key']) {
      if (!values['tls-cert'] || !values['tls-key']) throw new UsageError('--tls-cert and --tls-key go together');
      http.tls = { cert: path.resolve(String(values['tls-cert'])), key: path.resolve(String(values['tls-key'])) };
    } else if (values.tls !== undefined) {
      if (values.tls !== 'auto') throw new UsageError(`--tls: only "auto" is accepted, got ${values.tls}`);
      http.tls = 'auto';
    }
    // The HTTP server and every plugin: loaded here, so the other commands never load them.
    const { Appliance } = await import('../app.ts');
    const appliance = await Appliance.create({
      dataDir: str(values['data-dir']),
      overrides: Object.keys(http).length ? { http } : {},
      onFirstRun: (first) => {
        for (const line of firstRunLines(first)) io.out(line);
      },
    });
    const { url } = await appliance.start();
    const parentPort = (
      process as unknown as {
        parentPort?: {
          postMessage(m: unknown): void;
          on(e: 'message', cb: (ev: { data: unknown }) => void): void;
          off?(e: 'message', cb: (ev: { data: unknown }) => void): void;
        };
      }
    ).parentPort;
    let release = () => {
      // Replaced once the listeners below are set.
    };
    // Listening for the stop before saying it is ready: a supervisor that sends SIGTERM as soon as
    // it reads the line below must get a clean stop, not the default death by signal.
    const stopped = new Promise<void>((resolve) => {
      const stop = (why: string) => {
        io.err(`${why}: stopping`);
        void appliance.stop().then(resolve, resolve);
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      // A utilityProcess has no signal on Windows (kill() terminates it): the parent asks by message.
      const onMessage = (m: unknown) => {
        if ((m as { type?: string } | null)?.type === 'shutdown') stop('shutdown requested');
      };
      const onPortMessage = (ev: { data: unknown }) => onMessage(ev.data);
      parentPort?.on('message', onPortMessage);
      process.on('message', onMessage);
      // Listening keeps the channel (and the process) alive: let go once stopped.
      release = () => {
        parentPort?.off?.('message', onPortMessage);
        process.off('message', onMessage);
      };
    });
    io.out(`sovcomms ${BUILD} listening on ${url}`);
    // The desktop shell pins the certificate it is told here (over the parent channel, not the network).
    const certFingerprint256 = serverCertFingerprint(appliance);
    const started = { type: 'server-started', url, ...(certFingerprint256 ? { certFingerprint256 } : {}) };
    // Same readiness signal headless and under Electron's utilityProcess (actualbudget's idea).
    parentPort?.postMessage(started);
    process.send?.(started);
    await stopped;
    release();
    return 0;
  },
};

/** SHA-256 (hex with colons) of the certificate the listener serves, when it serves HTTPS. */
function serverCertFingerprint(appliance: Appliance): string | undefined {
  if (!(appliance.server instanceof https.Server)) return undefined;
  const tls = appliance.core.config.http.tls;
  const pem =
    tls === 'auto'
      ? appliance.host.provided(TLS_AUTO)?.getCredentials().cert
      : tls
        ? fs.readFileSync(path.resolve(appliance.core.config.dataDir, tls.cert))
        : undefined;
  if (!pem) return undefined;
  try {
    return new X509Certificate(pem).fingerprint256;
  } catch {
    return undefined;
  }
}
