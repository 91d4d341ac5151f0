/**
 * Issue 15's wallet issuer benchmark: credentials issued per second (SD-JWT VC and mdoc) beside
 * the signing ceiling measured in the same run. Target: at least half of the ceiling.
 *
 * 1. The ceiling: raw ES256 signatures per second with the tenant's own signing key (software,
 *    P-256, the Signer the issuer uses), over 600 bytes (about an SD-JWT's signing input).
 * 2. SD-JWT VC and mdoc issued per second through `IssuerService.issue` (what the credential
 *    endpoint does once the proof is checked: active key, status list index, build, sign, the
 *    credential row, which is written with the others of the same event-loop turn).
 * 3. The whole credential request as the service sees it (`IssuerService.credential`: request
 *    checks, jwt proof verified, nonce taken, SD-JWT issued, next nonce): no target, shown so the
 *    cost of the proof's ECDSA verification (dearer than a signature) is in the open.
 * Rounds alternate so a neighbour's burst on the shared machine hits all alike.
 * Knobs (env): BENCH_ISSUER_SECONDS (per round, 1.5), BENCH_ISSUER_ROUNDS (3).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import * as jose from 'jose';
import type { BenchResult } from './lib/contract.ts';
import type { IssuerServices } from '../plugins/wallet-issuer/index.ts';
import type { IssuerService } from '../plugins/wallet-issuer/service.ts';
import type { Tenant } from '../server/sdk.ts';

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
  const seconds = num('BENCH_ISSUER_SECONDS', 1.5);
  const rounds = num('BENCH_ISSUER_ROUNDS', 3);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-issuer-'));
  const { Appliance } = await import('../server/app.ts');
  const { default: audit } = await import('../plugins/audit/index.ts');
  const { default: oidc } = await import('../plugins/oidc/index.ts');
  const { default: walletIssuer } = await import('../plugins/wallet-issuer/index.ts');
  const { MDOC_CONFIG_ID, SD_JWT_CONFIG_ID, subjectClaims } = await import('../plugins/wallet-issuer/schemas.ts');
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const a = await Appliance.create({ dataDir: path.join(dir, 'data'), env: {}, plugins: [audit, oidc, walletIssuer], logDestination: sink });
  const { service } = a.host.services('wallet-issuer') as IssuerServices;
  const origin = 'https://issuer.bench.example';
  try {
    const tenant = a.core.tenants.primary()!;
    const claims = subjectClaims.parse({
      given_name: 'Erika',
      family_name: 'Mustermann',
      birthdate: '1984-01-26',
      nationalities: ['DE'],
      email: 'erika@example.org',
    });
    const offer = await service.createOffer(
      tenant,
      origin,
      { claims, pre_authorized: true, credential_configuration_ids: [SD_JWT_CONFIG_ID, MDOC_CONFIG_ID] },
      'bench',
    );
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const j = publicKey.export({ format: 'jwk' });
    const holder = { jwk: { kty: 'EC' as const, crv: 'P-256' as const, x: String(j.x), y: String(j.y) }, nonce: '' };
    const key = await service.keys.active(tenant);
    const data = crypto.randomBytes(600);

    const { issueSdJwt } = await import('../plugins/wallet-issuer/sdjwt.ts');
    const ops = {
      sign: () => key.signer.sign(data),
      sdjwtLib: () => issueSdJwt({ issuer: origin, key, holder: holder.jwk, claims, iat: 1, exp: 2, status: { idx: 0, uri: `${origin}/s` } }),
      sdjwt: () => service.issue(tenant, origin, offer.offer_id, SD_JWT_CONFIG_ID, claims, holder),
      mdoc: () => service.issue(tenant, origin, offer.offer_id, MDOC_CONFIG_ID, claims, holder),
    };
    for (const op of Object.values(ops)) await op();
    const tot = { sign: { n: 0, ms: 0 }, sdjwtLib: { n: 0, ms: 0 }, sdjwt: { n: 0, ms: 0 }, mdoc: { n: 0, ms: 0 } };
    for (let r = 0; r < rounds; r++) {
      for (const k of ['sign', 'sdjwtLib', 'sdjwt', 'mdoc'] as const) {
        const x = await rate(seconds, ops[k]);
        tot[k].n += x.n;
        tot[k].ms += x.ms;
      }
    }
    const per = (k: keyof typeof tot) => (tot[k].n / tot[k].ms) * 1000;

    // The whole request: proofs and access tokens made beforehand (the wallet's work is not the
    // issuer's); one token obtains at most credentialsPerToken credentials, so each serves that many.
    const perToken = service.config.credentialsPerToken;
    const requests: { proof: { proof_type: string; jwt: string } }[] = [];
    const want = Math.max(300, Math.ceil(3 * per('sdjwt') * seconds));
    const tokens: string[] = [];
    for (let i = 0; i < Math.ceil(want / perToken); i++) {
      const token = (await service.preAuthorizedGrant(tenant, {
        'pre-authorized_code': await preAuthCode(service, tenant, origin),
      })) as { access_token: string };
      tokens.push(token.access_token);
    }
    for (let i = 0; i < want; i++) {
      const { c_nonce } = service.newNonce(tenant);
      const jwt = await new jose.SignJWT({ aud: origin, iat: Math.floor(Date.now() / 1000), nonce: c_nonce })
        .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: holder.jwk })
        .sign(privateKey);
      requests.push({ proof: { proof_type: 'jwt', jwt } });
    }
    // Timed until the prepared proofs run out or the time is up, whichever comes first.
    const t0 = performance.now();
    const end = t0 + seconds * 1000;
    let done = 0;
    while (done < requests.length && performance.now() < end) {
      // As the route does: the access token looked up per request.
      const row = service.accessToken(tenant, tokens[Math.floor(done / perToken)]!)!;
      await service.credential(tenant, origin, row, { format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1', ...requests[done]! });
      done++;
    }
    const full = { n: done, ms: performance.now() - t0 };
    const fullRate = (full.n / full.ms) * 1000;

    const ceiling = per('sign');
    const how = `${rounds} alternating rounds of ${seconds} s, one at a time (no concurrency), software P-256 key, SQLite row per credential`;
    return [
      {
        name: 'SD-JWT VC PID credentials issued per second',
        value: Math.round(per('sdjwt')),
        unit: 'cred/s',
        peer: 'ES256 signatures per second, same key (signing ceiling)',
        peerValue: Math.round(ceiling),
        ratio: per('sdjwt') / ceiling,
        target: 'ratio >= 0.5',
        note: `IssuerService.issue: active key + status index + SD-JWT VC (sdjwt.ts: 5 disclosures, SHA-256) + signature + credential row (written in groups); ${how}; ${tot.sdjwt.n} credentials`,
      },
      {
        name: 'mdoc PID credentials issued per second',
        value: Math.round(per('mdoc')),
        unit: 'cred/s',
        peer: 'ES256 signatures per second, same key (signing ceiling)',
        peerValue: Math.round(ceiling),
        ratio: per('mdoc') / ceiling,
        target: 'ratio >= 0.5',
        note: `IssuerService.issue: active key + status index + IssuerSigned (mdoc.ts: 9 elements, MSO with status, COSE_Sign1) + credential row (written in groups); ${how}; ${tot.mdoc.n} credentials`,
      },
      {
        name: 'SD-JWT VCs built and signed per second by sdjwt.ts alone (no database, no status index)',
        value: Math.round(per('sdjwtLib')),
        unit: 'cred/s',
        peer: 'ES256 signatures per second, same key (signing ceiling)',
        peerValue: Math.round(ceiling),
        ratio: per('sdjwtLib') / ceiling,
        note: `where the SD-JWT time goes: the encoder with the same signer, without the service around it; ${tot.sdjwtLib.n} credentials`,
      },
      {
        name: 'whole SD-JWT credential requests per second (proof verified, nonce taken)',
        value: Math.round(fullRate),
        unit: 'req/s',
        peer: 'ES256 signatures per second, same key (signing ceiling)',
        peerValue: Math.round(ceiling),
        ratio: fullRate / ceiling,
        note: `IssuerService.credential without HTTP: token row, ES256 verify of the jwt proof (node:crypto; dearer than a signature) + nonce taken + token spent + claims unsealed + issue + next nonce; ${full.n} requests in ${(full.ms / 1000).toFixed(1)} s`,
      },
    ];
  } finally {
    service.close();
    await a.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A pre-authorized code of a fresh offer, read back as a wallet would from the offer object. */
async function preAuthCode(service: IssuerService, tenant: Tenant, origin: string): Promise<string> {
  const { SD_JWT_CONFIG_ID } = await import('../plugins/wallet-issuer/schemas.ts');
  const claims = { given_name: 'Erika', family_name: 'Mustermann' };
  const o = await service.createOffer(tenant, origin, { claims, pre_authorized: true, credential_configuration_ids: [SD_JWT_CONFIG_ID] }, 'bench');
  const obj = service.offerObject(tenant, origin, o.offer_id) as { grants: Record<string, { 'pre-authorized_code': string }> };
  return obj.grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']!['pre-authorized_code'];
}
