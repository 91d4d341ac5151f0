import { z } from 'zod';
import { type AuditWriter, envelope, envelopeSchema, pageOf, policy, reply, type RouteRegistrar, type Tenant } from '../../server/sdk.ts';
import { caQuery, caState, certItem, certQuery, issueBody, issueResponse, listQuery, revokeBody, revokeResponse, type RpCaConfig } from './schemas.ts';
import type { CaService } from './service.ts';

/** `registered(tenant, names)`: whether one of the names is a registered OIDC client of the tenant (undefined: no OpenID Provider to ask). */
export type RegisteredClient = (tenant: Tenant, names: string[]) => boolean | undefined;

export function rpCaRoutes(r: RouteRegistrar, service: () => Promise<CaService>, audit: AuditWriter, config: RpCaConfig, registered?: RegisteredClient): void {
  r.add({
    method: 'GET',
    path: '/rp-cert.ashx?ca',
    summary: "The tenant's RP certificate authority certificate (the trust anchor wallets pin)",
    auth: policy.public,
    query: caQuery,
    responses: {
      200: { description: 'CA certificate', contentType: 'application/x-pem-file' },
    },
    handler: async (req) => {
      const ca = await (await service()).ca(req.tenant);
      const headers = { 'Cache-Control': 'public, max-age=300' };
      return req.query.format === 'der'
        ? reply.buffer(200, ca.der, 'application/pkix-cert', headers)
        : reply.text(200, ca.pem, 'application/x-pem-file', headers);
    },
  });

  r.add({
    method: 'POST',
    path: '/rp-cert.ashx?issue',
    summary: 'Issue a relying-party access certificate (x509_san_dns / x509_hash client identifiers)',
    description:
      'The key comes from csr (PKCS#10 PEM; proof of possession; only its key is used), public_key (SPKI PEM or public JWK), ' +
      'or, with neither (client_id alone), is generated here: its private key is returned once when include_key is true and never stored. ' +
      'The CA decides subject and extensions: CN and dNSName from client_id, keyUsage digitalSignature, AKI/SKI, certificatePolicies with a CPS URI, a CRL distribution point.',
    auth: policy.adminOrHmac('rp-cert-issue'),
    rateLimit: 'sensitive',
    body: issueBody,
    bodyType: 'json',
    camelize: false,
    responses: {
      200: { description: 'the certificate', schema: issueResponse },
      400: { description: 'invalid_client_id: not a host name, or not a registered OIDC client of the tenant' },
    },
    handler: async (req) => {
      const who = req.principal?.userName ?? req.principal?.subject ?? '';
      const source = req.body.csr !== undefined ? 'csr' : req.body.public_key !== undefined ? 'public_key' : 'generated';
      const known = registered && ((names: string[]) => registered(req.tenant, names) ?? true);
      const out = await (await service()).issue(req.tenant, req.body, who, known);
      audit.write(req.tenant, {
        event: 'rp-cert-issue',
        user: who,
        ip: req.ip,
        ua: req.ua,
        extra: { serial: out.serial, client_id: out.client_id, days: req.body.days, source, not_after: out.not_after },
      });
      // The private key is in this body once: no cache may keep it.
      return reply(200, out, { 'Cache-Control': 'no-store' });
    },
  });

  r.add({
    method: 'GET',
    path: '/rp-cert.ashx?status',
    summary: "State of this tenant's CA: where its key lives (software or HSM), whether it opens now, validity and counts",
    description:
      'What `sovcomms ca status --json` shows, for the console dashboard. A tenant without a CA yet answers `{initialized: false}` and none is made.',
    auth: policy.adminOrHmac('rp-cert-status'),
    query: z.object({ status: z.string().optional() }),
    responses: { 200: { description: 'the CA state', schema: caState } },
    handler: async (req) => {
      const svc = await service();
      const s = svc.status(req.tenant);
      if (!s) return reply(200, { initialized: false }, { 'Cache-Control': 'no-store' });
      const { reachable, problem } = await svc.probe(req.tenant);
      const out: z.infer<typeof caState> = {
        initialized: true,
        key_store: s.key.kind === 'software' ? 'software' : 'hsm',
        key_location: s.keyLocation,
        key_ready: reachable,
        ...(problem ? { key_problem: problem } : {}),
        subject: s.subject,
        not_before: s.notBefore,
        not_after: s.notAfter,
        fingerprint_sha256: s.fingerprintSha256,
        generation: s.generation,
        issued: s.issued,
        revoked: s.revoked,
        crl_number: s.crlNumber,
      };
      return reply(200, out, { 'Cache-Control': 'no-store' });
    },
  });

  r.add({
    method: 'GET',
    path: '/rp-cert.ashx?list',
    summary: "Certificates this tenant's CA issued, newest first, with their status",
    auth: policy.adminOrHmac('rp-cert-list'),
    query: listQuery,
    responses: { 200: { description: 'list envelope of issued certificates', schema: envelopeSchema(certItem) } },
    handler: async (req) => {
      const page = pageOf(req.query);
      const { items, total } = (await service()).list(req.tenant, { ...page, purpose: req.query.purpose });
      return reply(200, envelope(items, total, page, req.raw.originalUrl), { 'Cache-Control': 'no-store' });
    },
  });

  r.add({
    method: 'GET',
    path: '/rp-cert.ashx?cert',
    summary: 'One issued certificate (PEM, as a download), by serial',
    auth: policy.adminOrHmac('rp-cert-cert'),
    query: certQuery,
    responses: { 200: { description: 'the certificate', contentType: 'application/x-pem-file' }, 404: { description: 'not_found' } },
    handler: async (req) => {
      const { serial, pem } = (await service()).certPem(req.tenant, req.query.serial);
      return reply.text(200, pem, 'application/x-pem-file', {
        'Content-Disposition': `attachment; filename="rp-cert-${serial}.pem"`,
        'Cache-Control': 'no-store',
      });
    },
  });

  r.add({
    method: 'POST',
    path: '/rp-cert.ashx?revoke',
    summary: 'Revoke an issued certificate (final); the next CRL lists it',
    auth: policy.adminOrHmac('rp-cert-revoke'),
    rateLimit: 'sensitive',
    body: revokeBody,
    bodyType: 'json',
    camelize: false,
    responses: { 200: { description: 'revoked', schema: revokeResponse } },
    handler: async (req) => {
      const who = req.principal?.userName ?? req.principal?.subject ?? '';
      const out = (await service()).revoke(req.tenant, req.body.serial, req.body.reason);
      audit.write(req.tenant, { event: 'rp-cert-revoke', user: who, ip: req.ip, ua: req.ua, extra: { serial: out.serial, reason: out.revocation_reason } });
      return out;
    },
  });

  r.add({
    method: 'GET',
    path: '/rp-cert.ashx?crl',
    summary: "The CA's certificate revocation list (RFC 5280 §5, DER)",
    auth: policy.public,
    responses: { 200: { description: 'CRL', contentType: 'application/pkix-crl' } },
    handler: async (req) => reply.buffer(200, await (await service()).crl(req.tenant), 'application/pkix-crl', { 'Cache-Control': 'public, max-age=300' }),
  });

  r.add({
    method: 'GET',
    path: '/rp-cert.ashx?cps',
    summary: 'Certification practice statement the certificates point to (certificatePolicies CPS URI)',
    auth: policy.public,
    query: z.object({}),
    responses: { 200: { description: 'plain-text CPS', contentType: 'text/plain' } },
    handler: (req) => reply.text(200, cpsText(req.tenant.host, config.policyOid)),
  });
}

function cpsText(host: string, oid: string): string {
  return [
    `Certification practice statement of the relying-party CA of ${host}`,
    '',
    `Policy OID: ${oid}`,
    'Subscribers: wallet relying parties (OpenID4VP verifiers) of this tenant, registered by its administrators.',
    'Identification: the administrator who requests a certificate vouches for the client identifier (DNS name) it names.',
    'Keys: ECDSA P-256 CA key in software (sealed at rest) or in a PKCS#11 HSM; subscriber keys are generated by the',
    'subscriber (CSR or public key) or generated here and handed over once, never stored.',
    'Certificates: keyUsage digitalSignature, subjectAltName dNSName, validity 1 to 825 days (default 90).',
    'Revocation: by the tenant administrator; published in the CRL at /rp-cert.ashx?crl.',
    '',
  ].join('\n');
}
