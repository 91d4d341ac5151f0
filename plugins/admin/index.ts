import { definePlugin } from '../../server/sdk.ts';
import { adminRoutes } from './routes.ts';
import { tenantRoutes } from './tenants.ts';
import { AdminService } from './service.ts';

/**
 * The console's admin API (ARCHITECTURE.md layout: `admin/`): users and ak_ API keys of a tenant
 * over HTTP (list, add, change role, reset password, disable and enable; list and revoke keys),
 * with a super-admin reaching other tenants. It owns no tables: accounts and keys are the core's,
 * reached through ctx.users and ctx.auth; every change is written to ctx.audit.
 */
export default definePlugin({
  name: 'admin',
  description: 'Console admin API: users and ak_ API keys over HTTP',
  // The audit trail is this plugin's point: start after the audit log, so ctx.audit writes there.
  dependsOn: ['audit'],
  setup(ctx) {
    return { service: new AdminService(ctx.db, ctx.users, ctx.auth, ctx.tenants, ctx.audit) };
  },
  routes(r, s, ctx) {
    adminRoutes(r, s.service);
    tenantRoutes(r, ctx.tenants, ctx.audit);
  },
});
