import fs from 'node:fs';
import { type CliCommand, type CliContext, parse, str, type Tenant, UsageError, zodMessage } from '../../server/sdk.ts';
import type { IssuerServices } from './index.ts';
import { offerAuditExtra } from './service.ts';
import { subjectClaims } from './schemas.ts';

const USAGE = [
  'issuer offer create --claims-file F [--format dc+sd-jwt|mso_mdoc] [--pre-authorized [--tx-code] | --user NAME] [--expires-in SEC] [--tenant HOST] [--origin URL]',
  'issuer revoke (--credential ID | --offer ID) [--tenant HOST]',
  'issuer init [--tenant HOST] [--hsm-module PATH --token-label L (--pin PIN | --pin-stdin)]',
  'issuer rotate [--tenant HOST]',
  'issuer status [--tenant HOST]',
];

/** The origin wallets reach the tenant at, as the server would answer (https on 443 / the configured port). */
function originOf(ctx: CliContext, tenant: Tenant, given: string | undefined): string {
  if (given) {
    let u: URL;
    try {
      u = new URL(given);
    } catch {
      throw new UsageError('--origin must be an absolute URL');
    }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new UsageError('--origin must be http(s)');
    return u.origin;
  }
  const tls = ctx.core.http.tls !== undefined;
  const port = ctx.core.http.port;
  const dflt = tls ? 443 : 80;
  return `${tls ? 'https' : 'http'}://${tenant.host}${port && port !== dflt ? `:${port}` : ''}`;
}

/** `sovcomms issuer ...`: offers, revocation, and where the issuer keys live. */
export const issuerCli: CliCommand<IssuerServices> = {
  summary: 'EU wallet issuer: create credential offers, revoke credentials, put issuer keys in an HSM, rotate them',
  usage: USAGE,
  changes: ['offer create', 'revoke', 'init', 'rotate'],
  audited: ['tenant', 'format', 'user'],
  async run(args, ctx, s) {
    const [sub, ...rest] = args;
    try {
      switch (sub) {
        case 'offer': {
          const [verb, ...more] = rest;
          if (verb !== 'create') throw new UsageError(verb ? `issuer offer: unknown subcommand ${verb}` : 'issuer offer: subcommand required (create)');
          const { values } = parse(
            more,
            {
              'claims-file': { type: 'string' },
              format: { type: 'string' },
              'pre-authorized': { type: 'boolean' },
              'tx-code': { type: 'boolean' },
              'expires-in': { type: 'string' },
              tenant: { type: 'string' },
              origin: { type: 'string' },
              user: { type: 'string' },
            },
            0,
          );
          const file = str(values['claims-file']);
          if (!file) throw new UsageError('--claims-file is required');
          const format = str(values.format) ?? 'dc+sd-jwt';
          if (format !== 'dc+sd-jwt' && format !== 'mso_mdoc') throw new UsageError('--format must be dc+sd-jwt or mso_mdoc');
          if (values['tx-code'] && !values['pre-authorized']) throw new UsageError('--tx-code needs --pre-authorized');
          const user = str(values.user);
          // As create-offer refuses `user` with `pre_authorized: true`: a pre-authorized code is
          // redeemed by whoever holds it, and only the sign-in of the authorization code flow can
          // prove which account redeems. Whether the account exists is checked by the service.
          if (user !== undefined && values['pre-authorized'])
            throw new UsageError('--user binds an authorization code offer (leave out --pre-authorized): only a sign-in can prove the account');
          if (user === '') throw new UsageError('--user needs a login name');
          let raw: unknown;
          try {
            raw = JSON.parse(fs.readFileSync(file, 'utf8'));
          } catch (e) {
            throw new UsageError(`--claims-file: ${(e as Error).message}`);
          }
          const claims = subjectClaims.safeParse(raw);
          if (!claims.success) throw new UsageError(`--claims-file: ${zodMessage(claims.error)}`);
          const expires = str(values['expires-in']);
          if (expires !== undefined && !/^\d{2,8}$/.test(expires)) throw new UsageError('--expires-in must be seconds');
          const tenant = ctx.tenants.require(str(values.tenant));
          const who = `cli:${process.env.USER ?? 'unknown'}`;
          const out = await s.service.createOffer(
            tenant,
            originOf(ctx, tenant, str(values.origin)),
            {
              format,
              claims: claims.data,
              pre_authorized: !!values['pre-authorized'],
              tx_code: values['tx-code'] ? true : undefined,
              expires_in: expires === undefined ? undefined : Number(expires),
              user,
            },
            who,
          );
          // The same event the API writes (the runner's generic cli-issuer-offer entry comes beside it).
          ctx.audit.write(tenant, { event: 'vci-offer-create', user: who, extra: offerAuditExtra(out, user) });
          ctx.out(out.offer_uri);
          ctx.out(`offer:    ${out.offer_id} (expires ${out.expires_at})`);
          ctx.out(`qr page:  ${out.qr_page}`);
          if (user !== undefined) ctx.out(`for user: ${user} (only this account can redeem the offer, by signing in)`);
          // Shown once: only its hash is stored.
          if (out.tx_code) ctx.out(`tx_code:  ${out.tx_code}  (shown once; give it to the holder separately)`);
          return 0;
        }
        case 'revoke': {
          const { values } = parse(rest, { credential: { type: 'string' }, offer: { type: 'string' }, tenant: { type: 'string' } }, 0);
          const credentialId = str(values.credential);
          const offerId = str(values.offer);
          if ((credentialId === undefined) === (offerId === undefined)) throw new UsageError('give exactly one of --credential ID or --offer ID');
          const tenant = ctx.tenants.require(str(values.tenant));
          const ids = s.service.revoke(tenant, { credentialId, offerId }, `cli:${process.env.USER ?? 'unknown'}`);
          ctx.out(ids.length ? `revoked: ${ids.join(' ')}` : 'nothing to revoke (already revoked)');
          return 0;
        }
        case 'init': {
          const { values } = parse(
            rest,
            {
              tenant: { type: 'string' },
              'hsm-module': { type: 'string' },
              'token-label': { type: 'string' },
              pin: { type: 'string' },
              'pin-stdin': { type: 'boolean' },
            },
            0,
          );
          const tenant = ctx.tenants.require(str(values.tenant));
          const module = str(values['hsm-module']);
          if (!module) {
            const extra = ['token-label', 'pin', 'pin-stdin'].find((f) => values[f] !== undefined);
            if (extra) throw new UsageError(`--${extra} needs --hsm-module`);
            const r = await s.service.keys.init(tenant, { kind: 'software' });
            ctx.out(`issuer keys of ${tenant.host} made in software: IACA ${r.iaca}, signing key ${r.signing}`);
            return 0;
          }
          if (!fs.existsSync(module)) throw new UsageError(`--hsm-module: no such file: ${module}`);
          const tokenLabel = str(values['token-label']);
          if (!tokenLabel) throw new UsageError('--hsm-module needs --token-label');
          if (values.pin !== undefined && values['pin-stdin']) throw new UsageError('--pin and --pin-stdin exclude each other');
          const pin = values['pin-stdin'] ? (await ctx.readStdin()).replace(/\r?\n$/, '') : str(values.pin);
          if (!pin) throw new UsageError('--hsm-module needs --pin or --pin-stdin');
          const r = await s.service.keys.init(tenant, { kind: 'pkcs11', hsm: { module, tokenLabel, pin } });
          ctx.out(`issuer keys of ${tenant.host} made in the HSM (token "${tokenLabel}"): IACA ${r.iaca}, signing key ${r.signing}`);
          return 0;
        }
        case 'rotate': {
          const { values } = parse(rest, { tenant: { type: 'string' } }, 0);
          const tenant = ctx.tenants.require(str(values.tenant));
          const r = await s.service.keys.rotate(tenant);
          ctx.out(`signing key of ${tenant.host} rotated: ${r.active} active; ${r.retired} stays published for ${s.service.config.rotationOverlapDays} days`);
          return 0;
        }
        case 'status': {
          const { values } = parse(rest, { tenant: { type: 'string' } }, 0);
          const tenant = ctx.tenants.require(str(values.tenant));
          const rows = s.service.keys.status(tenant);
          if (!rows.length) ctx.out(`no issuer keys yet for ${tenant.host}: made in software on first use, or run: sovcomms issuer init`);
          for (const r of rows) ctx.out(`${r.role.padEnd(8)} ${r.kid}  ${r.retired_at ? `retired ${r.retired_at}` : 'active'}  ${r.location}`);
          return 0;
        }
        default:
          throw new UsageError(sub ? `issuer: unknown subcommand ${sub}` : 'issuer: subcommand required (offer, revoke, init, rotate, status)');
      }
    } finally {
      s.service.close();
    }
  },
};
