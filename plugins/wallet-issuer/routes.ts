import { z } from 'zod';
import {
  AppError,
  type AuditWriter,
  cookies,
  envelope,
  envelopeSchema,
  html,
  pageOf,
  pageQuery,
  policy,
  reply,
  type RouteRegistrar,
  type RouteRequest,
} from '../../server/sdk.ts';
import type { OidcService, PageLang } from '../oidc/api.ts';
import { CREDENTIAL_VERIFIER } from './api.ts';
import { offerAuditExtra, SIGN_IN_COOKIE, SIGN_IN_PATH, type IssuerService } from './service.ts';
import { createOfferBody, createOfferResponse, credentialBody, parForm, revokeBody, revokeResponse, tokenForm, type IssuerConfig } from './schemas.ts';

/** qrcode (~25 ms of CPU and ~10 MB to load) on the first QR code asked for, not at every start. */
const qrcode = async () => (await import('qrcode')).default;

const area = 'wallet-issuer';
const oauthErrorSchema = z.object({ error: z.string(), error_description: z.string().optional() });
const jwks = z.object({ keys: z.array(z.record(z.string(), z.unknown())) });
const noStore = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

export function issuerRoutes(r: RouteRegistrar, s: IssuerService, audit: AuditWriter, config: IssuerConfig, oidc: Pick<OidcService, 'pageLang'>): void {
  // ---- metadata, keys, IACA ----------------------------------------------------------------------
  r.add({
    method: 'GET',
    path: '/vci.ashx?metadata',
    aliases: ['/.well-known/openid-credential-issuer'],
    summary: 'Credential issuer metadata (OpenID4VCI 1.0 §12.2, with the seed’s authorization server fields)',
    area,
    auth: policy.public,
    responses: { 200: { description: 'issuer metadata', schema: z.record(z.string(), z.unknown()) } },
    handler: (req) => reply(200, s.metadata(req.publicOrigin), { 'Cache-Control': 'public, max-age=300' }),
  });

  r.add({
    method: 'GET',
    path: '/.well-known/oauth-authorization-server/vci',
    summary: 'Authorization server metadata of the issuer (RFC 8414; PAR, S256 only, code, token auth none)',
    area,
    auth: policy.public,
    responses: { 200: { description: 'authorization server metadata', schema: z.record(z.string(), z.unknown()) } },
    handler: (req) => reply(200, s.authorizationServer(req.publicOrigin), { 'Cache-Control': 'public, max-age=300' }),
  });

  r.add({
    method: 'GET',
    path: '/vci.ashx?jwks',
    aliases: ['/.well-known/openid-credential-issuer/jwks'],
    summary: 'Credential signing keys (active and those retired within the rotation overlap), each with its x5c',
    area,
    auth: policy.public,
    responses: { 200: { description: 'JWKS', schema: jwks } },
    handler: async (req) => reply(200, await s.jwks(req.tenant), { 'Cache-Control': 'public, max-age=300' }),
  });

  r.add({
    method: 'GET',
    path: '/vci.ashx?iaca',
    summary: "The tenant's IACA certificate (PEM): the trust anchor a verifier is configured with",
    area,
    auth: policy.public,
    responses: { 200: { description: 'IACA certificate', contentType: 'application/x-pem-file' } },
    handler: async (req) => reply.text(200, (await s.iaca(req.tenant)).pem, 'application/x-pem-file', { 'Cache-Control': 'public, max-age=300' }),
  });

  // ---- offers ------------------------------------------------------------------------------------
  r.add({
    method: 'POST',
    path: '/vci.ashx?create-offer',
    summary: 'Create a credential offer (credential, subject claims, pre-authorized or not, tx_code, expiry)',
    description: 'The answer carries the tx_code once; it is stored only as a hash.',
    area,
    auth: policy.adminOrHmac('create-offer'),
    rateLimit: 'sensitive',
    body: createOfferBody,
    bodyType: 'json',
    camelize: false,
    bodyLimit: 32 * 1024,
    responses: { 200: { description: 'the offer', schema: createOfferResponse } },
    handler: async (req) => {
      const who = who_(req);
      const out = await s.createOffer(req.tenant, req.publicOrigin, req.body, who);
      audit.write(req.tenant, {
        event: 'vci-offer-create',
        user: who,
        ip: req.ip,
        ua: req.ua,
        extra: offerAuditExtra(out, req.body.user),
      });
      return reply(200, out, noStore);
    },
  });

  r.add({
    method: 'GET',
    path: '/vci.ashx?offer',
    summary: 'The Credential Offer object behind credential_offer_uri (rate-limited per IP)',
    area,
    auth: policy.public,
    query: z.object({ offer: z.string().min(1).max(100) }).loose(),
    rateLimit: { name: 'vci-offer', perMinute: config.offerPerMinute },
    responses: { 200: { description: 'credential offer', schema: z.record(z.string(), z.unknown()) }, 404: { description: 'unknown, expired or used' } },
    handler: (req) => reply(200, s.offerObject(req.tenant, req.publicOrigin, req.query.offer), noStore),
  });

  r.add({
    method: 'GET',
    path: '/vci.ashx?offer-page',
    summary: 'A page with the openid-credential-offer:// QR code of an offer',
    area,
    auth: policy.public,
    query: z.object({ 'offer-page': z.string().min(1).max(100) }).loose(),
    rateLimit: { name: 'vci-offer', perMinute: config.offerPerMinute },
    responses: { 200: { description: 'HTML page', contentType: 'text/html' } },
    handler: async (req) => {
      const id = req.query['offer-page'];
      if (!s.offerAlive(req.tenant, id)) throw new AppError(404, 'not_found', 'no such offer (unknown, expired or used)');
      const uri = s.offerUri(req.publicOrigin, id);
      const svg = await (await qrcode()).toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
      const lang = oidc.pageLang(req);
      return reply.text(200, offerPage(uri, svg, config.displayName, lang), 'text/html; charset=utf-8', {
        ...noStore,
        'Content-Security-Policy': OFFER_PAGE_CSP,
        'Content-Language': lang,
      });
    },
  });

  // ---- token, nonce, PAR, authorize ---------------------------------------------------------------
  r.add({
    method: 'POST',
    path: '/vci.ashx?token',
    summary: 'Issuer token endpoint: authorization_code and the OpenID4VCI pre-authorized_code grant',
    description: 'Form-encoded. Also answers the pre-authorized_code grant at /oauth2/v1/token (same handler).',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: tokenForm,
    rateLimit: { name: 'vci-token', perMinute: config.tokenPerMinute },
    responses: {
      200: { description: '{access_token, token_type, expires_in, c_nonce, c_nonce_expires_in}' },
      400: { description: 'invalid_grant, invalid_request', schema: oauthErrorSchema },
      401: { description: 'invalid_client', schema: oauthErrorSchema },
    },
    handler: async (req) => {
      const out = await s.token(req.tenant, req.body).catch((e: unknown) => {
        audit.write(req.tenant, {
          event: 'vci-token-fail',
          ip: req.ip,
          ua: req.ua,
          extra: { grant: req.body.grant_type, error: (e as AppError).code ?? 'error' },
        });
        throw e;
      });
      return reply(200, out, noStore);
    },
  });

  r.add({
    method: 'POST',
    path: '/vci.ashx?nonce',
    summary: 'Nonce Endpoint (OpenID4VCI 1.0 §7): a fresh c_nonce',
    area,
    auth: policy.public,
    rateLimit: { name: 'vci-credential', perMinute: config.credentialPerMinute },
    responses: { 200: { description: '{c_nonce, c_nonce_expires_in}' } },
    handler: (req) => reply(200, { c_nonce: s.newNonce(req.tenant).c_nonce }, noStore),
  });

  r.add({
    method: 'POST',
    path: '/vci.ashx?par',
    summary: 'Pushed authorization request (RFC 9126) for whitelisted public wallet clients; PKCE S256',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: parForm,
    rateLimit: { name: 'vci-token', perMinute: config.tokenPerMinute },
    responses: { 201: { description: '{request_uri, expires_in}' }, 400: { description: 'OAuth error', schema: oauthErrorSchema } },
    handler: (req) => reply(201, s.par(req.tenant, req.body), noStore),
  });

  r.add({
    method: 'GET',
    path: '/vci.ashx?authorize',
    aliases: ['/vci/authorize'],
    summary: "Authorization endpoint of the issuer (request_uri from PAR, or the same parameters); sends the browser to the tenant's sign-in",
    description:
      'The checked request waits while the person signs in at the OpenID Provider of the tenant (/oauth2/v1/authorize, client wallet-issuer); ' +
      'its callback (/vci/callback) redirects to the wallet with code, state, iss.',
    area,
    auth: policy.public,
    rateLimit: { name: 'vci-token', perMinute: config.tokenPerMinute },
    responses: { 302: { description: 'redirect to the sign-in of the tenant' }, 400: { description: 'OAuth error', schema: oauthErrorSchema } },
    handler: (req) => {
      // The sign-in's cookie and callback live on the public origin: a browser that came by
      // another name is first sent there, so the callback sees the cookie it was given.
      if (req.origin !== req.publicOrigin) return reply.redirect(`${req.publicOrigin}${req.raw.originalUrl}`, 302, noStore);
      const out = s.authorize(req.tenant, req.publicOrigin, strings(req.query));
      audit.write(req.tenant, { event: 'vci-authorize', ip: req.ip, ua: req.ua, extra: { client_id: strings(req.query).client_id } });
      return reply.redirect(out.location, 302, { ...noStore, 'Set-Cookie': signInCookie(out.browser, req.origin, config.signInTtlSec) });
    },
  });

  r.add({
    method: 'GET',
    path: '/vci.ashx?signed-in',
    aliases: [SIGN_IN_PATH],
    summary: 'Where the OpenID Provider returns after the sign-in: redirects to the wallet with code, state, iss (or an OAuth error)',
    area,
    auth: policy.public,
    rateLimit: { name: 'vci-token', perMinute: config.tokenPerMinute },
    responses: {
      302: { description: 'redirect to the wallet' },
      400: { description: 'OAuth error (unknown sign-in, other browser)', schema: oauthErrorSchema },
    },
    handler: async (req) => {
      const out = await s.signedIn(req.tenant, req.publicOrigin, strings(req.query), cookies.get(req.headers.cookie, SIGN_IN_COOKIE), {
        ip: req.ip,
        ua: req.ua,
        headers: req.headers,
      });
      audit.write(req.tenant, {
        event: out.error ? 'vci-sign-in-fail' : 'vci-sign-in',
        user: out.user,
        ip: req.ip,
        ua: req.ua,
        extra: out.error ? { error: out.error } : {},
      });
      return reply.redirect(out.location, 302, { ...noStore, 'Set-Cookie': signInCookie('', req.origin, 0) });
    },
  });

  // ---- credential --------------------------------------------------------------------------------
  r.add({
    method: 'POST',
    path: '/vci.ashx?credential',
    summary: 'Credential endpoint: SD-JWT VC (dc+sd-jwt) or mdoc (mso_mdoc), bound to the proof key',
    description:
      'Seed shape: format + vct/doctype + proof {proof_type, jwt|cwt}. OpenID4VCI 1.0: credential_configuration_id + proofs. ' +
      'Errors: invalid_proof, invalid_nonce, unsupported_credential_type, unsupported_proof_type, unknown_credential_configuration; 429 per IP.',
    area,
    auth: policy.custom(CREDENTIAL_VERIFIER, 'credential access token'),
    rateLimit: { name: 'vci-credential', perMinute: config.credentialPerMinute },
    body: credentialBody,
    bodyType: 'json',
    camelize: false,
    bodyLimit: 64 * 1024,
    responses: {
      200: { description: '{credential, format, credentials: [{credential}]}' },
      400: { description: 'credential error', schema: oauthErrorSchema },
      401: { description: 'no or bad credential access token' },
      429: { description: 'rate limited (Retry-After)' },
    },
    handler: async (req) => {
      const token = s.accessToken(req.tenant, req.principal!.subject);
      if (!token) throw new AppError(401, 'invalid_token', 'credential access token expired');
      const out = await s.credential(req.tenant, req.publicOrigin, token, req.body);
      audit.write(req.tenant, { event: 'vci-credential-issue', ip: req.ip, ua: req.ua, extra: { offer: token.offer_id, format: String(out.format) } });
      return reply(200, out, noStore);
    },
  });

  // ---- status list and revocation ---------------------------------------------------------------
  r.add({
    method: 'GET',
    path: '/vci.ashx?status-list',
    summary: 'Token Status List (draft-ietf-oauth-status-list): statuslist+jwt of one list',
    area,
    auth: policy.public,
    query: z.object({ 'status-list': z.coerce.number().int().min(1).max(1_000_000) }).loose(),
    responses: { 200: { description: 'status list token', contentType: 'application/statuslist+jwt' } },
    handler: async (req) =>
      reply.text(200, await s.statusList(req.tenant, req.publicOrigin, req.query['status-list']), 'application/statuslist+jwt', {
        'Cache-Control': `public, max-age=${Math.min(60, config.statusListTtlSec)}`,
      }),
  });

  r.add({
    method: 'POST',
    path: '/vci.ashx?revoke',
    summary: 'Revoke an issued credential, or every credential of an offer (status list entry set to INVALID)',
    area,
    auth: policy.adminOrHmac('vci-revoke'),
    rateLimit: 'sensitive',
    body: revokeBody,
    bodyType: 'json',
    camelize: false,
    responses: { 200: { description: 'revoked ids', schema: revokeResponse }, 404: { description: 'not_found' } },
    handler: (req) => {
      const who = who_(req);
      const revoked = s.revoke(req.tenant, { credentialId: req.body.credential_id, offerId: req.body.offer_id }, who);
      audit.write(req.tenant, {
        event: 'vci-revoke',
        user: who,
        ip: req.ip,
        ua: req.ua,
        extra: { credential: req.body.credential_id, offer: req.body.offer_id, count: revoked.length },
      });
      return reply(200, { revoked });
    },
  });

  r.add({
    method: 'GET',
    path: '/vci.ashx?credentials',
    summary: 'Credentials issued by this tenant, newest first (no credential contents, only their status)',
    area,
    auth: policy.adminOrHmac('vci-credentials'),
    query: pageQuery.extend({ offer_id: z.string().max(100).optional() }),
    responses: { 200: { description: 'list envelope', schema: envelopeSchema(z.record(z.string(), z.unknown())) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const { items, total } = s.credentials(req.tenant, { offerId: req.query.offer_id, ...page });
      const out = items.map((c) => ({
        id: c.id,
        offerId: c.offer_id,
        format: c.format,
        statusList: c.list_id,
        statusIndex: c.idx,
        createdAt: c.created_at,
        expiresAt: c.expires_at,
        revokedAt: c.revoked_at,
      }));
      return reply(200, envelope(out, total, page, req.raw.originalUrl));
    },
  });
}

function strings(q: unknown): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries((q ?? {}) as Record<string, unknown>)) if (typeof v === 'string' && v.length <= 8000) out[k] = v;
  return out;
}

/** The sign-in's browser binding (SameSite=Lax: the OpenID Provider's redirect back is a top-level GET). */
function signInCookie(value: string, origin: string, maxAge: number): string {
  return cookies.serialize(SIGN_IN_COOKIE, value, { maxAge, secure: origin.startsWith('https:') });
}

function who_(req: RouteRequest): string {
  return req.principal?.userName ?? req.principal?.subject ?? '';
}

const OFFER_STYLE =
  'body{font-family:system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem;text-align:center}svg{width:min(80vw,22rem);height:auto}a{word-break:break-all}';
/** The QR code is inline SVG; its one style block is allowed by its hash. */
const OFFER_PAGE_CSP = html.csp({ styles: [OFFER_STYLE], img: ['data:'] });

/** The offer page's words in the languages of the provider's pages (which one: `OidcService.pageLang`). */
const OFFER_TEXT: Record<PageLang, { title: string; scan: string; qr: string; open: string }> = {
  en: {
    title: 'credential offer',
    scan: 'Scan this code with your wallet to receive your credential.',
    qr: 'QR code of the credential offer',
    open: 'Open in a wallet on this device',
  },
  de: {
    title: 'Nachweis-Angebot',
    scan: 'Scannen Sie diesen Code mit Ihrer Wallet, um Ihren Nachweis zu erhalten.',
    qr: 'QR-Code des Nachweis-Angebots',
    open: 'In einer Wallet auf diesem Gerät öffnen',
  },
};

function offerPage(uri: string, svg: string, name: string, lang: PageLang): string {
  const t = OFFER_TEXT[lang];
  return html.page({
    title: `${name}: ${t.title}`,
    style: OFFER_STYLE,
    lang,
    body: [
      `<h1>${html.escape(name)}</h1>`,
      `<p>${html.escape(t.scan)}</p>`,
      `<div role="img" aria-label="${html.escape(t.qr)}">${svg}</div>`,
      `<p><a href="${html.escape(uri)}">${html.escape(t.open)}</a></p>`,
    ].join('\n'),
  });
}
