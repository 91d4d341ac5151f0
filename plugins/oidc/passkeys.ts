import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { z } from 'zod';
import { AppError, type ErrorReason, type PluginContext, policy, reply, type RouteRegistrar } from '../../server/sdk.ts';
import { pageLang } from './page-text.ts';
import { page } from './pages.ts';
import type { OidcConfig } from './schemas.ts';
import type { OidcServices } from './services.ts';
import { rpId } from './signin.ts';

// Loaded on first use: @simplewebauthn/server costs part of every start, and most starts never see a passkey.
const webauthn = () => import('@simplewebauthn/server');

/**
 * Passkeys (WebAuthn Level 3, discoverable credentials): sign-in with a passkey, and the signed-in
 * user's page to register one. User verification is required both ways.
 */
export function passkeyRoutes(r: RouteRegistrar, ctx: PluginContext<OidcConfig>, s: OidcServices, area: string): void {
  const { signIn, provider } = s;
  const signinStart = z.object({ i: z.string().max(64).optional(), csrf: z.string().max(128) }).strict();
  r.add({
    method: 'POST',
    path: '/oidc.ashx/passkey/options',
    summary: 'WebAuthn authentication options (discoverable credentials)',
    area,
    auth: policy.public,
    body: signinStart,
    camelize: false,
    rateLimit: 'sensitive',
    responses: { 200: { description: 'PublicKeyCredentialRequestOptionsJSON', schema: z.object({ challenge: z.string() }).loose() } },
    handler: async (req, res) => {
      signIn.requireCsrf(req, `login|${req.body.i ?? ''}`, req.body.csrf);
      const opts = await (await webauthn()).generateAuthenticationOptions({ rpID: rpId(req), userVerification: 'required', allowCredentials: [] });
      signIn.sealChallenge(req, res, { c: opts.challenge, p: 'signin' });
      ctx.audit.write(req.tenant, { event: 'passkey-signin-start', ip: req.ip, ua: req.ua });
      return opts;
    },
  });
  const signinFinish = z
    .object({ i: z.string().max(64).optional(), csrf: z.string().max(128), response: z.object({ id: z.string().max(1024) }).loose() })
    .strict();
  r.add({
    method: 'POST',
    path: '/oidc.ashx/passkey/verify',
    summary: 'WebAuthn assertion check; signs in',
    area,
    auth: policy.public,
    body: signinFinish,
    camelize: false,
    rateLimit: 'sensitive',
    responses: { 200: { description: '{redirect}', schema: z.object({ redirect: z.string() }) }, 400: { description: 'passkey not accepted' } },
    handler: async (req, res) => {
      signIn.requireCsrf(req, `login|${req.body.i ?? ''}`, req.body.csrf);
      const ch = signIn.takeChallenge(req, res, 'signin');
      const fail = (reason: ErrorReason<'passkey_rejected'>, why: string, user?: string) => {
        ctx.audit.write(req.tenant, { event: 'passkey-signin-fail', user, ip: req.ip, ua: req.ua, extra: { reason: why }, aggregate: true });
        return new AppError(400, 'passkey_rejected', `passkey not accepted: ${why}`, { reason });
      };
      if (!ch) throw fail('challenge_expired', 'no or expired challenge');
      const row = provider.repo.passkey(req.tenant, req.body.response.id);
      if (!row) throw fail('unknown_credential', 'unknown credential');
      const user = provider.activeUser(req.tenant, row.user_id);
      if (!user) throw fail('account_inactive', 'account not active');
      let v;
      try {
        v = await (
          await webauthn()
        ).verifyAuthenticationResponse({
          response: req.body.response as unknown as AuthenticationResponseJSON,
          expectedChallenge: ch.c,
          expectedOrigin: req.origin,
          expectedRPID: rpId(req),
          credential: {
            id: row.id,
            publicKey: Buffer.from(row.public_key, 'base64url'),
            counter: row.counter,
            transports: JSON.parse(row.transports) as string[],
          },
          requireUserVerification: true,
        });
      } catch (e) {
        throw fail('verification_failed', (e as Error).message.slice(0, 200), user.name);
      }
      if (!v.verified) throw fail('verification_failed', 'signature not verified', user.name);
      provider.repo.setPasskeyCounter(row.id, v.authenticationInfo.newCounter);
      ctx.audit.write(req.tenant, { event: 'passkey-signin-ok', user: user.name, ip: req.ip, ua: req.ua });
      return { redirect: signIn.signIn(req, res, user, ['hwk', 'user'], req.body.i) };
    },
  });
  r.add({
    method: 'GET',
    path: '/passkeys.html',
    summary: 'Passkeys of the signed-in user (register a new one)',
    area,
    auth: policy.public,
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      const user = signIn.currentUser(req);
      if (!user) return reply.redirect('/login.html', 302);
      const b = signIn.ensureBrowser(req, res);
      const n = provider.repo.passkeysOf(req.tenant, user.id).length;
      return page('passkeys.html', { tenant: req.tenant.name, user: user.name, count: n, csrf: signIn.csrf(b, 'passkey-register') }, 200, pageLang(req));
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/passkey/register-options',
    summary: 'WebAuthn registration options for the signed-in user',
    area,
    auth: policy.public,
    body: z.object({ csrf: z.string().max(128) }).strict(),
    camelize: false,
    rateLimit: 'sensitive',
    responses: { 200: { description: 'PublicKeyCredentialCreationOptionsJSON', schema: z.object({ challenge: z.string() }).loose() } },
    handler: async (req, res) => {
      signIn.requireCsrf(req, 'passkey-register', req.body.csrf);
      const user = signIn.currentUser(req);
      if (!user) throw new AppError(401, 'login_required', 'sign in first');
      const existing = provider.repo.passkeysOf(req.tenant, user.id);
      const opts = await (
        await webauthn()
      ).generateRegistrationOptions({
        rpName: req.tenant.name,
        rpID: rpId(req),
        userName: user.name,
        userID: new TextEncoder().encode(user.id),
        attestationType: 'none',
        authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
        excludeCredentials: existing.map((e) => ({ id: e.id, transports: JSON.parse(e.transports) as string[] })),
      });
      signIn.sealChallenge(req, res, { c: opts.challenge, p: 'register', u: user.id });
      return opts;
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/passkey/register',
    summary: 'Stores a new passkey of the signed-in user',
    area,
    auth: policy.public,
    body: z.object({ csrf: z.string().max(128), response: z.object({ id: z.string().max(1024) }).loose() }).strict(),
    camelize: false,
    rateLimit: 'sensitive',
    responses: { 200: { description: '{id}', schema: z.object({ id: z.string() }) } },
    handler: async (req, res) => {
      signIn.requireCsrf(req, 'passkey-register', req.body.csrf);
      const user = signIn.currentUser(req);
      const ch = signIn.takeChallenge(req, res, 'register');
      if (!user || !ch || ch.u !== user.id)
        throw new AppError(400, 'passkey_rejected', 'no registration in progress for this user', { reason: 'no_registration' });
      let v;
      try {
        v = await (
          await webauthn()
        ).verifyRegistrationResponse({
          response: req.body.response as unknown as RegistrationResponseJSON,
          expectedChallenge: ch.c,
          expectedOrigin: req.origin,
          expectedRPID: rpId(req),
          requireUserVerification: true,
        });
      } catch (e) {
        throw new AppError(400, 'passkey_rejected', `registration not accepted: ${(e as Error).message.slice(0, 200)}`, {
          reason: 'registration_invalid',
        });
      }
      if (!v.verified) throw new AppError(400, 'passkey_rejected', 'registration not verified', { reason: 'registration_unverified' });
      const c = v.registrationInfo.credential;
      provider.repo.insertPasskey(
        req.tenant,
        user.id,
        { id: c.id, publicKey: Buffer.from(c.publicKey).toString('base64url'), counter: c.counter, transports: c.transports ?? [] },
        new Date(ctx.clock.now()).toISOString(),
      );
      ctx.audit.write(req.tenant, { event: 'passkey-register', user: user.name, ip: req.ip, ua: req.ua });
      return { id: c.id };
    },
  });
}
