/**
 * The data the v1 read benchmarks (backup, slow-clients) serve: a fresh appliance's data dir
 * with an `ak_` API key of the primary tenant's admin and `rows` audit rows a minute apart,
 * ending now. The appliance is stopped again; the caller starts its own server on the dir.
 */
import { Appliance } from '../../server/app.ts';
import type { CoreServices } from '../../server/core.ts';
import { AuditRepo } from '../../plugins/audit/repo.ts';

export interface Seeded {
  /** `ak_` key of the admin of the primary tenant. */
  key: string;
  /** The admin's first-run password. */
  password: string;
}

/** Seeds `dataDir`; `more` runs on the open appliance before it stops (extra tables, files). */
export async function seedAuditlog(dataDir: string, rows: number, more?: (core: CoreServices) => void): Promise<Seeded> {
  let password = '';
  const a = await Appliance.create({ dataDir, env: {}, overrides: { log: { level: 'silent' } }, onFirstRun: (f) => (password = f.password) });
  try {
    const core = a.core;
    const tenant = core.tenants.primary()!;
    const key = core.auth.createApiKey(tenant, core.users.byName(tenant, 'admin')!, { name: 'bench', createdBy: 'bench' }).key;
    const repo = new AuditRepo(core.db);
    const start = Date.now() - rows * 60_000;
    core.db.transaction(() => {
      for (let i = 0; i < rows; i++)
        repo.insert(tenant, {
          ts: new Date(start + i * 60_000).toISOString(),
          event: 'bench',
          user: `u${i % 50}`,
          ip: '10.0.0.1',
          ua: 'bench',
          extra: `n=${i}`,
        });
    })();
    more?.(core);
    return { key, password };
  } finally {
    await a.stop();
  }
}
