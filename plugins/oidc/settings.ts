import type { DB, Tenant } from '../../server/sdk.ts';
import type { OidcConfig } from './schemas.ts';

export interface TenantOidcSettings {
  allowPlainPkce: boolean;
}

/** Per-tenant switches over the plugin-wide defaults (the issue: "plain can be switched off per tenant"). */
export class TenantSettings {
  constructor(
    private readonly db: DB,
    private readonly config: OidcConfig,
  ) {}

  get(tenant: Tenant): TenantOidcSettings {
    const r = this.db.prepare('SELECT settings FROM oidc_tenant_settings WHERE tenant_id = ?').get(tenant.id) as { settings: string } | undefined;
    const s = r ? (JSON.parse(r.settings) as Partial<TenantOidcSettings>) : {};
    return { allowPlainPkce: s.allowPlainPkce ?? this.config.allowPlainPkce };
  }

  allowPlainPkce(tenant: Tenant): boolean {
    return this.get(tenant).allowPlainPkce;
  }

  update(tenant: Tenant, patch: Partial<TenantOidcSettings>): TenantOidcSettings {
    const next = { ...this.get(tenant), ...Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) };
    this.db
      .prepare('INSERT INTO oidc_tenant_settings (tenant_id, settings) VALUES (?, ?) ON CONFLICT (tenant_id) DO UPDATE SET settings = excluded.settings')
      .run(tenant.id, JSON.stringify(next));
    return next;
  }
}
