/**
 * Issue 6's certificate-authority benchmark: how fast the CA issues, with its key in software and
 * in SoftHSM2 (PKCS#11), side by side in one run.
 *
 * 1. Certificates issued per second through `CaService.issueLeaf` (what `POST /rp-cert.ashx?issue`
 *    does after parsing: build the TBSCertificate with @peculiar/x509, sign, store the row), one
 *    tenant with a software key and one with its key in a SoftHSM2 token, in alternating rounds
 *    so a neighbour's burst on the shared machine hits both alike. The subscriber key is fixed, so
 *    key generation is not in the number.
 * 2. Raw ECDSA P-256 signatures per second: SoftHSM2's CKM_ECDSA over a SHA-256 digest computed in
 *    Node, beside Node's own crypto.sign.
 * Knobs (env): BENCH_RPCA_SECONDS (per round, 2), BENCH_RPCA_ROUNDS (3).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { execFileSync } from 'node:child_process';
import type { BenchResult } from './lib/contract.ts';

const MODULE = '/usr/lib/softhsm/libsofthsm2.so';
const num = (name: string, dflt: number) => {
  const v = Number(process.env[name] ?? dflt);
  return Number.isFinite(v) && v > 0 ? v : dflt;
};

async function rate(seconds: number, op: () => Promise<unknown>): Promise<{ n: number; ms: number }> {
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  let n = 0;
  while (performance.now() < end) {
    await op();
    n++;
  }
  return { n, ms: performance.now() - t0 };
}

export default async function run(): Promise<BenchResult[]> {
  const seconds = num('BENCH_RPCA_SECONDS', 2);
  const rounds = num('BENCH_RPCA_ROUNDS', 3);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-rp-ca-'));
  const tokens = path.join(dir, 'tokens');
  fs.mkdirSync(tokens);
  const conf = path.join(dir, 'softhsm2.conf');
  fs.writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  // Read by libsofthsm2 when this process first loads it (below).
  process.env.SOFTHSM2_CONF = conf;
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', 'bench', '--so-pin', '12345678', '--pin', '1234'], { stdio: 'ignore' });

  const { Appliance } = await import('../server/app.ts');
  const { default: rpCa } = await import('../plugins/rp-ca/index.ts');
  const { CaService } = await import('../plugins/rp-ca/service.ts');
  const { rpCaConfig } = await import('../plugins/rp-ca/schemas.ts');
  const { Pkcs11Signer, SoftwareSigner } = await import('../server/p256-signer.ts');
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const a = await Appliance.create({ dataDir: path.join(dir, 'data'), env: {}, plugins: [rpCa], logDestination: sink });
  const core = a.core;
  const service = new CaService({ db: core.db, keys: core.keys, clock: core.clock, log: core.log, config: rpCaConfig.parse({}) });
  try {
    const sw = core.tenants.primary()!;
    const hsm = core.tenants.add('hsm.bench.example');
    await service.init(sw);
    await service.init(hsm, { hsm: { module: MODULE, tokenLabel: 'bench', pin: '1234', keyLabel: 'bench-ca' } });
    const spki = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'der', type: 'spki' });
    let i = 0;
    const issue = (t: typeof sw) => () =>
      service.issueLeaf(t, {
        purpose: 'rp',
        clientId: `x509_san_dns:rp${i}.example`,
        subjectCn: `rp${i}.example`,
        dnsNames: [`rp${i++}.example`],
        ipAddresses: [],
        spki,
        keySource: 'public_key',
        days: 90,
        issuedBy: 'bench',
      });
    await issue(sw)();
    await issue(hsm)();
    const tot = { sw: { n: 0, ms: 0 }, hsm: { n: 0, ms: 0 } };
    for (let r = 0; r < rounds; r++) {
      for (const [k, t] of [
        ['sw', sw],
        ['hsm', hsm],
      ] as const) {
        const x = await rate(seconds, issue(t));
        tot[k].n += x.n;
        tot[k].ms += x.ms;
      }
    }
    const swRate = (tot.sw.n / tot.sw.ms) * 1000;
    const hsmRate = (tot.hsm.n / tot.hsm.ms) * 1000;

    // Raw signatures: the token's CKM_ECDSA (digest in Node) against Node's crypto.sign.
    const { signer: token } = Pkcs11Signer.open({ module: MODULE, tokenLabel: 'bench', pin: '1234', keyLabel: 'bench-ca' });
    const soft = SoftwareSigner.generate().signer;
    const data = crypto.randomBytes(300);
    const sig = { sw: { n: 0, ms: 0 }, hsm: { n: 0, ms: 0 } };
    for (let r = 0; r < rounds; r++) {
      for (const [k, s] of [
        ['sw', soft],
        ['hsm', token],
      ] as const) {
        const x = await rate(seconds / 2, () => s.sign(data));
        sig[k].n += x.n;
        sig[k].ms += x.ms;
      }
    }
    token.close();
    const swSig = (sig.sw.n / sig.sw.ms) * 1000;
    const hsmSig = (sig.hsm.n / sig.hsm.ms) * 1000;
    const how = `${rounds} alternating rounds of ${seconds} s, one at a time (no concurrency), SQLite row per certificate`;
    return [
      {
        name: 'certificates issued per second (HSM key, SoftHSM2)',
        value: Math.round(hsmRate),
        unit: 'cert/s',
        peer: 'same CA, software key',
        peerValue: Math.round(swRate),
        ratio: hsmRate / swRate,
        note: `CaService.issueLeaf: @peculiar/x509 TBS + ECDSA P-256 signature + insert; ${how}; ${tot.hsm.n} and ${tot.sw.n} certificates`,
      },
      {
        name: 'ECDSA P-256 signatures per second (SoftHSM2 CKM_ECDSA, SHA-256 in Node)',
        value: Math.round(hsmSig),
        unit: 'sig/s',
        peer: 'node:crypto sign (software key)',
        peerValue: Math.round(swSig),
        ratio: hsmSig / swSig,
        note: 'synchronous pkcs11js C_SignInit + C_Sign on one session vs crypto.sign with dsaEncoding ieee-p1363',
      },
    ];
  } finally {
    service.close();
    await a.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
