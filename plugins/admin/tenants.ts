import { z } from 'zod';
import {
  type AuditWriter,
  InputError,
  NotFoundError,
  policy,
  reply,
  type RouteRegistrar,
  type RouteRequest,
  type Tenant,
  type TenantService,
} from '../../server/sdk.ts';

const V1 = '/api.ashx/v1';

export const tenantView = z.object({
  id: z.string(),
  host: z.string().describe('the main host name'),
  name: z.string(),
  primary: z.boolean(),
  hosts: z.array(z.string()).describe('every host name that reaches the tenant, the main one first'),
  origin: z
    .string()
    .nullable()
    .describe(
      'the configured public origin of signed and published URLs (credential issuer, status lists, OIDC issuer, metadata, mailed links); null: the host name on the listening scheme and port',
    ),
});
const tenantCreate = z.object({ host: z.string().min(1).max(253), name: z.string().min(1).max(100).optional() }).strict();
const hostBody = z.object({ host: z.string().min(1).max(253) }).strict();
const originBody = z
  .object({
    origin: z.string().min(1).max(300).nullable().describe('https://name[:port] (scheme, host, port only), or null for the default'),
  })
  .strict();
// Removing a tenant deletes all its data: the body must repeat the host, like typing a repository's name to delete it.
const removeBody = z.object({ confirm: z.string().min(1).max(253).describe("the tenant's main host name, repeated") }).strict();
const idParam = z.object({ id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a tenant id') });

function view(t: Tenant): z.infer<typeof tenantView> {
  return { id: t.id, host: t.host, name: t.name, primary: t.isPrimary, hosts: [...t.hosts], origin: t.publicOrigin ?? null };
}

/**
 * Tenants over HTTP for the console (the CLI's `tenant` commands): a super-admin lists, adds,
 * gives host names, makes primary and removes; any other admin sees only their own tenant. Every
 * change is audited in the super-admin's (primary) tenant, which outlives a removed one.
 */
export function tenantRoutes(r: RouteRegistrar, tenants: TenantService, audit: AuditWriter): void {
  const log = (req: RouteRequest, event: string, extra: Record<string, string>) =>
    audit.write(req.tenant, { event, user: req.principal?.userName ?? req.principal?.subject ?? 'unknown', ip: req.ip, ua: req.ua, extra });
  const byId = (id: string): Tenant => {
    const t = tenants.byId(id);
    if (!t) throw new NotFoundError(`no tenant ${id}`);
    return t;
  };

  r.add({
    method: 'GET',
    path: `${V1}/tenants`,
    area: 'tenants',
    auth: policy.adminBearerOnly,
    summary: 'Tenants: every one for a super-admin, else only the caller’s own',
    responses: { 200: { description: 'tenants, the primary first', schema: z.object({ data: z.array(tenantView), superAdmin: z.boolean() }) } },
    handler: (req) => {
      const superAdmin = !!req.principal?.superAdmin;
      return { data: (superAdmin ? tenants.list() : [req.tenant]).map(view), superAdmin };
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/tenants`,
    area: 'tenants',
    auth: policy.superAdmin(),
    rateLimit: 'sensitive',
    summary: 'Add a tenant with its main host name',
    body: tenantCreate,
    responses: { 201: { description: 'the tenant', schema: tenantView }, 409: { description: 'duplicate_tenant: the host already serves a tenant' } },
    handler: (req) => {
      const t = tenants.add(req.body.host, req.body.name);
      log(req, 'tenant-add', { host: t.host, id: t.id });
      return reply(201, view(t));
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/tenants/:id/hosts`,
    area: 'tenants',
    auth: policy.superAdmin(),
    rateLimit: 'sensitive',
    summary: 'Add a host name to a tenant',
    params: idParam,
    body: hostBody,
    responses: { 200: { description: 'the tenant', schema: tenantView }, 404: { description: 'not_found' }, 409: { description: 'duplicate_tenant' } },
    handler: (req) => {
      const t = byId(req.params.id);
      tenants.addHost(t.id, req.body.host);
      log(req, 'tenant-add-host', { tenant: t.host, host: req.body.host });
      return view(byId(t.id));
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/tenants/:id/origin`,
    area: 'tenants',
    auth: policy.superAdmin(),
    rateLimit: 'sensitive',
    summary: 'Set (or with null clear) the public origin every signed or published URL of the tenant uses',
    description:
      'Credential issuer and status lists, OIDC issuer and discovery, federation statements, verifier metadata and mailed links name this origin, ' +
      'whatever Host a request carries. 400 invalid_origin for anything but scheme, host and optional port.',
    params: idParam,
    body: originBody,
    responses: { 200: { description: 'the tenant', schema: tenantView }, 400: { description: 'invalid_origin' }, 404: { description: 'not_found' } },
    handler: (req) => {
      const t = tenants.setOrigin(byId(req.params.id).id, req.body.origin);
      log(req, 'tenant-set-origin', { tenant: t.host, origin: t.publicOrigin ?? '(default)' });
      return view(t);
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/tenants/:id/primary`,
    area: 'tenants',
    auth: policy.superAdmin(),
    rateLimit: 'sensitive',
    summary: 'Make a tenant the primary one (its admins become the super-admins)',
    params: idParam,
    responses: { 200: { description: 'the tenant', schema: tenantView }, 404: { description: 'not_found' } },
    handler: (req) => {
      const t = tenants.setPrimary(byId(req.params.id).host);
      log(req, 'tenant-set-primary', { tenant: t.host });
      return view(t);
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/tenants/:id/remove`,
    area: 'tenants',
    auth: policy.superAdmin(),
    rateLimit: 'sensitive',
    summary: 'Remove a tenant with all its data (the body repeats its host name); never the primary',
    params: idParam,
    body: removeBody,
    responses: {
      200: { description: 'removed', schema: z.object({ ok: z.literal(true), host: z.string() }) },
      400: { description: 'confirm_mismatch, or cannot_remove_primary' },
      404: { description: 'not_found' },
    },
    handler: (req) => {
      const t = byId(req.params.id);
      if (req.body.confirm.toLowerCase() !== t.host)
        throw new InputError(`confirm must repeat the host name ${t.host}`, 'confirm_mismatch', { field: 'confirm' });
      tenants.remove(t.host);
      log(req, 'tenant-remove', { host: t.host, id: t.id });
      return { ok: true as const, host: t.host };
    },
  });
}
