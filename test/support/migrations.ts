import { CORE_MIGRATIONS } from '../../server/app.ts';
import type { AnyPlugin } from '../../server/plugin.ts';
import { openStore, type DB } from '../../server/store/db.ts';
import { appliedVersion, migrate } from '../../server/store/migrate.ts';
import { TenantService, type Tenant } from '../../server/tenancy.ts';
import { scratchDirs } from './cleanup.ts';

const dir = scratchDirs('sovcomms-migration-');

export interface OldStore {
  db: DB;
  tenant: Tenant;
  /** Applies the plugin's remaining migrations with the real runner; returns their names. */
  upgrade: () => string[];
}

/**
 * A migration upgrade test's first half (STYLE.md "Migrations are numbered, monotonic, tested"):
 * a fresh store with the core migrated and `plugin` migrated with the real runner only up to
 * `version`, and one primary tenant. The test writes the rows that version wrote, calls
 * `upgrade()`, and checks what the later migrations made of them. A new plugin migration gets its
 * test in a few lines.
 */
export function storeAt(plugin: AnyPlugin, version: number): OldStore {
  const d = dir();
  const db = openStore(d);
  migrate(db, 'core', CORE_MIGRATIONS);
  const all = plugin.migrations ?? [];
  migrate(
    db,
    plugin.name,
    all.filter((m) => m.version <= version),
  );
  if (appliedVersion(db, plugin.name) !== version) throw new Error(`${plugin.name} is at ${appliedVersion(db, plugin.name)}, not ${version}`);
  const tenant = new TenantService(db, d).add('office.example', 'Office', { primary: true });
  return { db, tenant, upgrade: () => migrate(db, plugin.name, all).applied };
}
