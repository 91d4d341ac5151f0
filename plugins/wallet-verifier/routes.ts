import { AppError, cookies, html, NotFoundError, type PluginContext, policy, reply, resourcePath, type RouteRegistrar } from '../../server/sdk.ts';
import type { AnchorStore } from './anchors.ts';
import {
  anchorAddBody,
  anchorRemoveBody,
  profileAddBody,
  profileRemoveBody,
  sessionQuery,
  vpEventsQuery,
  startQuery,
  type VerifierConfig,
  vpResponseResult,
  vpStartResponse,
  walletLoginCompleteBody,
  walletLoginReturnQuery,
  walletLoginStartBody,
} from './schemas.ts';
import type { VerifierService } from './service.ts';
import type { NetworkProfiles } from './network.ts';
import { z } from 'zod';
import fs from 'node:fs';
import type { OidcService, PageLang } from '../oidc/api.ts';
import { answerTextKey, walletScriptTexts, walletText, type WalletTextKey } from './page-text.ts';

/** qrcode (~25 ms of CPU and ~10 MB to load) on the first QR code asked for, not at every start. */
const qrcode = async () => (await import('qrcode')).default;

const NO_STORE = { 'Cache-Control': 'no-store' };

export function verifierRoutes(
  r: RouteRegistrar,
  svc: VerifierService,
  anchors: AnchorStore,
  network: NetworkProfiles,
  ctx: PluginContext<VerifierConfig>,
  oidc: OidcService,
): void {
  const rateLimit = { name: 'wallet-verifier', perMinute: ctx.config.perIpPerMinute };

  r.add({
    method: 'GET',
    path: '/oidc.ashx?action=vp-start',
    summary: 'Start a wallet presentation (OpenID4VP 1.0): a session, its request_uri and the openid4vp:// deep link',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    query: startQuery,
    responses: { 200: { description: 'VpStartResponse', schema: vpStartResponse } },
    handler: async (req) => reply(200, await svc.start(req.tenant, req.publicOrigin, req.query, req), NO_STORE),
  });

  r.add({
    method: 'GET',
    path: '/oidc.ashx?action=vp-request',
    summary:
      'The signed request object of a session (typ oauth-authz-req+jwt, x5c from the RP CA); the same nonce, state and key on every fetch while the session waits',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    query: sessionQuery,
    responses: { 200: { description: 'request object JWT', contentType: 'application/oauth-authz-req+jwt' } },
    handler: async (req) =>
      reply.text(200, await svc.request(req.tenant, req.publicOrigin, req.query.session_id, req), 'application/oauth-authz-req+jwt', NO_STORE),
  });

  r.add({
    method: 'POST',
    path: '/oidc.ashx?action=vp-response',
    summary: "The wallet's response: form (direct_post, or direct_post.jwt as response=<JWE>), application/jose, or a raw CBOR DeviceResponse",
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    query: z.object({ action: z.string().optional(), session_id: z.string().min(1).max(64).optional() }),
    bodyType: 'raw',
    contentTypes: ['application/x-www-form-urlencoded', 'application/jose', 'application/jwt', 'application/cbor', 'application/octet-stream'],
    bodyLimit: 512 * 1024,
    responses: {
      200: { description: 'VpResponseResult', schema: vpResponseResult },
      400: { description: 'the presentation failed a check (named in `check`), or the session is unknown, expired or finished' },
      501: { description: 'mdoc_verify_not_configured' },
    },
    handler: async (req) =>
      reply(200, await svc.respond(req.tenant, req.publicOrigin, req.query.session_id, req.rawBody, req.headers['content-type'] ?? '', req), NO_STORE),
  });

  r.add({
    method: 'GET',
    path: '/oidc.ashx?action=vp-result',
    summary: 'The result of a session so far (pending, verified or error): what the QR page and the sign-in page poll',
    description:
      'Anyone holding the session id (it is in the QR code) gets the status and, on error, the failed check; the disclosed claims ' +
      '(`presentation`) only with the header `X-Sovcomms-Result-Key: <result_key from vp-start>`. A wrong key is 403 access_denied. ' +
      'sso_assertion and network_config are never repeated here (the wallet got them in the vp-response answer).',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit: { name: 'wallet-verifier-poll', perMinute: ctx.config.perIpPerMinute * 5 },
    query: sessionQuery,
    responses: {
      200: { description: 'status and, when finished, the VpResponseResult (presentation empty without the result key)' },
      403: { description: 'access_denied: the result key is not this session’s' },
      404: { description: 'unknown session' },
    },
    handler: (req) => {
      const key = req.headers['x-sovcomms-result-key'];
      return reply(200, svc.result(req.tenant, req.query.session_id, typeof key === 'string' ? key : undefined), NO_STORE);
    },
  });

  r.add({
    method: 'GET',
    path: '/oidc.ashx/vp-qr',
    summary: 'A page showing the deep link of a session as a QR code (cross-device) and as a link (same-device)',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    query: z.object({ session_id: z.string().min(1).max(64) }),
    responses: { 200: { description: 'HTML page', contentType: 'text/html' } },
    handler: async (req) => {
      const url = svc.openid4vpUrl(req.tenant, req.publicOrigin, req.query.session_id);
      const svg = await (await qrcode()).toString(url, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
      return reply.text(200, qrPage(url, svg, oidc.pageLang(req)), 'text/html; charset=utf-8', { ...QR_PAGE_HEADERS, 'Content-Language': oidc.pageLang(req) });
    },
  });

  r.add({
    method: 'GET',
    path: '/oidc.ashx/vp-qr.svg',
    summary: 'The deep link of a session as an SVG QR code (the login page shows it)',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    query: z.object({ session_id: z.string().min(1).max(64) }),
    responses: { 200: { description: 'SVG image', contentType: 'image/svg+xml' } },
    handler: async (req) => {
      const url = svc.openid4vpUrl(req.tenant, req.publicOrigin, req.query.session_id);
      const svg = await (await qrcode()).toString(url, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
      // The QR code's SVG has no style and no script: nothing may load or run in it.
      return reply.text(200, svg, 'image/svg+xml', { ...NO_STORE, 'Content-Security-Policy': html.csp({}) });
    },
  });

  // ---- wallet sign-in on /login.html (the oidc plugin's page; this plugin adds the block) ----
  r.add({
    method: 'POST',
    path: '/oidc.ashx/wallet-login/start',
    summary: 'Login page: start a wallet sign-in (a presentation session bound to a secret only the page holds)',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    body: walletLoginStartBody,
    bodyType: 'json',
    camelize: false,
    responses: { 200: { description: '{session_id, openid4vp_url, qr_svg, login_secret, expires_in}; sets the browser-binding cookie' } },
    handler: async (req) => {
      const { page, browserSecret } = await svc.startLogin(req.tenant, req.publicOrigin, req.body.i ?? '', req);
      return reply(200, page, { ...NO_STORE, 'Set-Cookie': bindingCookie(browserSecret, req.origin, page.expires_in) });
    },
  });

  r.add({
    method: 'POST',
    path: '/oidc.ashx/wallet-login/review',
    summary: 'Login page: after vp-result says verified, the name the wallet presented and its account, for the person to confirm before completing',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    body: walletLoginCompleteBody,
    bodyType: 'json',
    camelize: false,
    responses: {
      200: { description: '{name, account}' },
      403: { description: "another page's session, or no account for this PID (access_denied)" },
      404: { description: 'unknown sign-in session' },
      409: { description: 'not verified yet, or already completed' },
    },
    handler: (req) => reply(200, svc.reviewLogin(req.tenant, req.body.session_id, req.body.login_secret), NO_STORE),
  });

  r.add({
    method: 'GET',
    path: '/oidc.ashx/wallet-login/return',
    summary: "Login page, same-device: the wallet's redirect_uri; signs in the browser that started the sign-in (its cookie), else says to confirm there",
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    query: walletLoginReturnQuery,
    responses: {
      303: { description: 'signed in: onward to the pending authorization, or a page' },
      200: { description: 'HTML page: this browser did not start the sign-in; it is confirmed on the page that did', contentType: 'text/html' },
      400: { description: 'HTML page: the link lacks its session_id or response_code, or they are malformed', contentType: 'text/html' },
      403: { description: 'HTML page: the response_code is not valid or already used, or no account for this PID', contentType: 'text/html' },
      404: { description: 'HTML page: the sign-in is not known here, or its account is no longer active', contentType: 'text/html' },
      429: { description: 'HTML page: too many requests from this address', contentType: 'text/html' },
    },
    handler: (req, res) => {
      const lang = oidc.pageLang(req);
      const headers = { ...PAGE_HEADERS, 'Content-Language': lang };
      // A refusal (thrown here or by the query check before) is the errorPage below.
      const out = svc.returnLogin(req.tenant, req.query.session_id, req.query.response_code, cookies.get(req.headers.cookie, BINDING_COOKIE), req);
      if ('elsewhere' in out) {
        return reply.text(200, messagePage(walletText(lang, 'answerTitle'), walletText(lang, 'answerElsewhere'), lang), 'text/html; charset=utf-8', headers);
      }
      const user = ctx.users.get(req.tenant, out.signIn.userId);
      if (!user || user.status !== 'active') {
        throw new AppError(404, 'not_found', 'the account of this sign-in is no longer active', { reason: 'account_inactive' });
      }
      const next = oidc.signInBrowser(req, res, user, ['pid'], out.signIn.interaction);
      res.append('Set-Cookie', bindingCookie('', req.origin, 0));
      return reply.redirect(next, 303, NO_STORE);
    },
    // A person's browser followed the wallet here: every refusal (a mangled link the query check
    // refused, a rate limit, the handler's own) is a sentence in the page's language, the code only
    // a small technical detail.
    errorPage: (req, e) => {
      const lang = oidc.pageLang(req);
      const why = walletText(lang, answerTextKey(e.code, e.reason));
      const detail = walletText(lang, 'answerDetail', { code: e.reason ? `${e.code} (${e.reason})` : e.code });
      return reply.text(e.status, messagePage(walletText(lang, 'answerTitle'), why, lang, detail), 'text/html; charset=utf-8', {
        ...PAGE_HEADERS,
        'Content-Language': lang,
      });
    },
  });

  r.add({
    method: 'POST',
    path: '/oidc.ashx/wallet-login/complete',
    summary:
      'Login page: after the person confirmed the name wallet-login/review showed, sign this browser in as the account the PID maps to (tenant policy); once',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    body: walletLoginCompleteBody,
    bodyType: 'json',
    camelize: false,
    responses: {
      200: { description: '{redirect}: the pending authorization, or a page' },
      403: { description: "another page's session, or no account for this PID (access_denied)" },
      404: { description: 'unknown sign-in session' },
      409: { description: 'not verified yet, not reviewed, or already completed' },
    },
    handler: (req, res) => {
      const { userId, interaction } = svc.completeLogin(req.tenant, req.body.session_id, req.body.login_secret, req);
      const user = ctx.users.get(req.tenant, userId);
      if (!user || user.status !== 'active') throw new NotFoundError('the account of this sign-in is no longer active');
      return reply(200, { redirect: oidc.signInBrowser(req, res, user, ['pid'], interaction) }, NO_STORE);
    },
  });

  r.add({
    method: 'GET',
    path: '/oidc.ashx/wallet-login.js',
    summary: 'Login page script of the wallet sign-in block',
    area: 'wallet-verifier',
    auth: policy.public,
    responses: { 200: { description: 'script', contentType: 'text/javascript' } },
    handler: () => reply.text(200, LOGIN_JS(), 'text/javascript; charset=utf-8', { 'Cache-Control': 'no-cache' }),
  });

  r.add({
    method: 'GET',
    path: '/.well-known/eudiw-verifier-metadata',
    aliases: ['/.well-known/eudiw-verifier-metadata.json'],
    summary: "The verifier's metadata: client ids, certificate, formats, encryption, presets",
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    responses: { 200: { description: 'verifier metadata JSON' } },
    handler: async (req) => reply(200, await svc.metadata(req.tenant, req.publicOrigin), { 'Cache-Control': 'public, max-age=300' }),
  });

  r.add({
    method: 'GET',
    path: '/oidc.ashx?action=network-config',
    summary: 'The signed NetworkConfig of a session that presented a PID with scope network_access; the same until expires_at',
    area: 'wallet-verifier',
    auth: policy.public,
    rateLimit,
    query: sessionQuery,
    responses: { 200: { description: 'NetworkConfig' }, 404: { description: 'unknown or expired session' } },
    handler: (req) => {
      const { body, expiresAt } = network.config(req.tenant, req.query.session_id);
      const maxAge = Math.max(0, Math.floor((Date.parse(expiresAt) - ctx.clock.now()) / 1000));
      // Private: it carries a credential for one device; idempotent until it expires.
      return reply(200, body, { 'Cache-Control': `private, max-age=${maxAge}`, Expires: new Date(expiresAt).toUTCString() });
    },
  });

  r.add({
    method: 'GET',
    path: '/signal.ashx?verifier-profiles=list',
    summary: 'Network access profiles of this tenant',
    area: 'wallet-verifier',
    auth: policy.adminOrHmac('verifier-profiles-list'),
    responses: { 200: { description: 'profiles' } },
    handler: (req) => reply(200, { profiles: network.list(req.tenant) }, NO_STORE),
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?verifier-profiles=add',
    summary: 'Add a network access profile (Wi-Fi, APN, VPN) a verified PID presentation can receive',
    area: 'wallet-verifier',
    auth: policy.adminOrHmac('verifier-profiles-add'),
    rateLimit: 'sensitive',
    body: profileAddBody,
    bodyType: 'json',
    camelize: false,
    responses: { 200: { description: 'the profile' }, 409: { description: 'conflict' } },
    handler: (req) => {
      const who = req.principal?.userName ?? req.principal?.subject ?? 'hmac';
      const b = req.body;
      const p = network.add(req.tenant, {
        name: b.name,
        type: b.type,
        ssid: b.ssid,
        eapMethod: b.eap_method,
        identityTemplate: b.identity_template,
        ttlMinutes: b.ttl_minutes,
      });
      ctx.audit.write(req.tenant, { event: 'verifier-profile-add', user: who, ip: req.ip, ua: req.ua, extra: { name: p.name, type: p.network_type } });
      return p;
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?verifier-profiles=remove',
    summary: 'Remove a network access profile',
    area: 'wallet-verifier',
    auth: policy.adminOrHmac('verifier-profiles-remove'),
    rateLimit: 'sensitive',
    body: profileRemoveBody,
    bodyType: 'json',
    camelize: false,
    responses: { 200: { description: 'removed' }, 404: { description: 'not_found' } },
    handler: (req) => {
      const who = req.principal?.userName ?? req.principal?.subject ?? 'hmac';
      network.remove(req.tenant, req.body.name);
      ctx.audit.write(req.tenant, { event: 'verifier-profile-remove', user: who, ip: req.ip, ua: req.ua, extra: { name: req.body.name } });
      return { removed: true };
    },
  });

  r.add({
    method: 'GET',
    path: '/signal.ashx?list-vp-events',
    summary: 'The verifier audit log: vp-start, vp-request, vp-response-arrived, vp-verify-result, vp-sso-minted (newest first)',
    area: 'wallet-verifier',
    auth: policy.adminOrHmac('list-vp-events'),
    query: vpEventsQuery,
    responses: { 200: { description: 'audit entries (ts, event, tenant, user, ip, ua, extra)' } },
    handler: (req) => reply(200, { events: svc.events(req.tenant, req.query) }, NO_STORE),
  });

  r.add({
    method: 'GET',
    path: '/signal.ashx?verifier-anchors=list',
    summary: "The tenant's issuer trust anchors for presentations (added ones and the LOTL's PID providers)",
    area: 'wallet-verifier',
    auth: policy.adminOrHmac('verifier-anchors-list'),
    responses: { 200: { description: 'anchors' } },
    handler: (req) => reply(200, { anchors: anchors.list(req.tenant) }, NO_STORE),
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?verifier-anchors=add',
    summary: 'Trust an issuer certificate (PID provider or IACA) for presentations in this tenant',
    area: 'wallet-verifier',
    auth: policy.adminOrHmac('verifier-anchors-add'),
    rateLimit: 'sensitive',
    body: anchorAddBody,
    bodyType: 'json',
    camelize: false,
    responses: { 200: { description: 'the anchor' }, 409: { description: 'duplicate_anchor' } },
    handler: (req) => {
      const who = req.principal?.userName ?? req.principal?.subject ?? 'hmac';
      const a = anchors.add(req.tenant, req.body.pem, who);
      ctx.audit.write(req.tenant, { event: 'verifier-trust-add', user: who, ip: req.ip, ua: req.ua, extra: { sha256: a.sha256 } });
      return a;
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?verifier-anchors=remove',
    summary: 'Stop trusting an issuer certificate this tenant added',
    area: 'wallet-verifier',
    auth: policy.adminOrHmac('verifier-anchors-remove'),
    rateLimit: 'sensitive',
    body: anchorRemoveBody,
    bodyType: 'json',
    camelize: false,
    responses: { 200: { description: 'removed' }, 404: { description: 'not_found' } },
    handler: (req) => {
      const who = req.principal?.userName ?? req.principal?.subject ?? 'hmac';
      anchors.remove(req.tenant, req.body.sha256);
      ctx.audit.write(req.tenant, { event: 'verifier-trust-remove', user: who, ip: req.ip, ua: req.ua, extra: { sha256: req.body.sha256 } });
      return { removed: true };
    },
  });
}

/**
 * Binds a login-page sign-in to the browser that started it (OpenID4VP 1.0 §13.3). SameSite=Strict:
 * the wallet app opening the redirect_uri is a navigation without a site and carries it, a link or
 * script on another site does not, so nobody can send this browser there with their own code.
 */
const BINDING_COOKIE = 'sc_wallet_login';
const PAGE_HEADERS = {
  ...NO_STORE,
  'Content-Security-Policy': "default-src 'none'; style-src 'self'; frame-ancestors 'none'",
  'Referrer-Policy': 'no-referrer',
};

function bindingCookie(value: string, origin: string, maxAge: number): string {
  return cookies.serialize(BINDING_COOKIE, value, { secure: origin.startsWith('https:'), maxAge, path: '/oidc.ashx/wallet-login', sameSite: 'Strict' });
}

function messagePage(title: string, text: string, lang: PageLang, detail?: string): string {
  const small = detail ? `<p id="wallet-return-detail"><small>${html.escape(detail)}</small></p>` : '';
  return `<!doctype html>
<html lang="${lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${html.escape(title)}</title><link rel="stylesheet" href="/login/style.css"></head>
<body><main><h1>${html.escape(title)}</h1><p id="wallet-return-message">${html.escape(text)}</p>${small}</main></body></html>
`;
}

let loginJs: string | undefined;
const LOGIN_JS = () => (loginJs ??= fs.readFileSync(resourcePath('wallet-login', 'wallet-login.js'), 'utf8'));

/** The block the login page shows (registered with the oidc plugin's login options). */
export function walletLoginBlock(i: string, lang: PageLang = 'en'): string {
  const t = (k: WalletTextKey) => html.escape(walletText(lang, k));
  const said = walletScriptTexts(lang)
    .map(([a, v]) => ` ${a}="${html.escape(v)}"`)
    .join('');
  return `<section id="wallet-signin" data-i="${html.escape(i)}"${said} aria-labelledby="wallet-signin-title">
  <h2 id="wallet-signin-title">${t('blockTitle')}</h2>
  <button type="button" id="wallet-signin-start">${t('blockTitle')}</button>
  <div id="wallet-signin-box" hidden>
    <p>${t('scan')}</p>
    <img id="wallet-signin-qr" alt="${t('qrAlt')}" width="240" height="240">
    <p><a id="wallet-signin-link" href="#">${t('openHere')}</a></p>
  </div>
  <div id="wallet-signin-confirm" hidden>
    <p>${t('presentedBefore')} <strong id="wallet-signin-name"></strong> (${t('presentedAccount')} <span id="wallet-signin-account"></span>)${t('presentedAfter')}</p>
    <button type="button" id="wallet-signin-continue">${t('continue')}</button>
    <button type="button" id="wallet-signin-cancel">${t('notMe')}</button>
  </div>
  <p id="wallet-signin-status" role="status" aria-live="polite"></p>
</section>
<script src="/oidc.ashx/wallet-login.js"></script>`;
}

const QR_STYLE = 'body{font-family:system-ui,sans-serif;max-width:28rem;margin:2rem auto;text-align:center}#qr svg{width:18rem;height:18rem}';

/**
 * The QR page carries a live session's deep link: no script, no subresource, and no framing (a
 * page that framed it could dress the code up as its own). CSP3 hash-source: the one inline style
 * block is allowed by its digest, never 'unsafe-inline'. The inline SVG uses presentation
 * attributes only, which no style-src governs.
 */
const QR_PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  ...NO_STORE,
  'Content-Security-Policy': html.csp({ styles: [QR_STYLE] }),
  'X-Frame-Options': 'DENY',
});

function qrPage(url: string, svg: string, lang: PageLang): string {
  const t = (k: WalletTextKey) => html.escape(walletText(lang, k));
  return html.page({
    title: walletText(lang, 'qrTitle'),
    style: QR_STYLE,
    lang,
    body: [
      `<h1>${t('qrTitle')}</h1>`,
      `<p>${t('qrScan')}</p>`,
      `<div id="qr" role="img" aria-label="${t('qrAlt')}">${svg}</div>`,
      `<p><a id="same-device" href="${html.escape(url)}">${t('openHere')}</a></p>`,
    ].join('\n'),
  });
}
