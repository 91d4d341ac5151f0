import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { Clock, Logger, Paths, Tenant } from '../../server/sdk.ts';

export const WALLET_CLIENTS_FILE = 'wallet-clients.json';
const CACHE_MS = 5 * 60_000;

/**
 * The wallet client whitelist (spec "Wallet client whitelist"): required `client_ids` (at least
 * one string), optional `_schema` (URI) and `_notes` (string) that the loader ignores, nothing else.
 */
export const walletClientsFile = z
  .object({
    client_ids: z.array(z.string().min(1).max(200)).min(1).max(1000),
    _schema: z.url().optional(),
    _notes: z.string().optional(),
  })
  .strict();

/**
 * Per tenant `<data-dir>/tenants/<tenant-id>/wallet-clients.json`, read at most every 5 minutes per
 * tenant. Created with the one default client_id on the first issuance request when absent; a
 * malformed or empty file falls back to the built-in default and is left as it is (the operator's
 * file is never overwritten).
 */
export class WalletClients {
  readonly #cache = new Map<string, { ids: ReadonlySet<string>; until: number }>();

  constructor(
    private readonly paths: Paths,
    private readonly clock: Clock,
    private readonly defaultClientId: string,
    private readonly log: Logger,
  ) {}

  file(tenant: Tenant): string {
    return this.paths.tenantFile(tenant, WALLET_CLIENTS_FILE);
  }

  /** The accepted client ids (cached 5 minutes per tenant). */
  clientIds(tenant: Tenant): ReadonlySet<string> {
    const now = this.clock.now();
    const hit = this.#cache.get(tenant.id);
    if (hit && hit.until > now) return hit.ids;
    const ids = this.read(tenant);
    this.#cache.set(tenant.id, { ids, until: now + CACHE_MS });
    return ids;
  }

  allowed(tenant: Tenant, clientId: string): boolean {
    return this.clientIds(tenant).has(clientId);
  }

  /** Writes the default file when none exists (first issuance request); never replaces one. */
  ensureFile(tenant: Tenant): void {
    const f = this.file(tenant);
    if (fs.existsSync(f)) return;
    fs.mkdirSync(path.dirname(f), { recursive: true, mode: 0o700 });
    const body = {
      client_ids: [this.defaultClientId],
      _notes: 'Wallet client_ids accepted at the issuer PAR and authorize endpoints. Changes apply within 5 minutes.',
    };
    try {
      // wx: a file another process wrote a moment ago stays.
      fs.writeFileSync(f, JSON.stringify(body, null, 2) + '\n', { flag: 'wx', mode: 0o644 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }

  private read(tenant: Tenant): ReadonlySet<string> {
    const fallback = new Set([this.defaultClientId]);
    const f = this.file(tenant);
    let text: string;
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log.warn({ tenant: tenant.host, err: (e as Error).message }, 'wallet-clients.json unreadable; using the default client');
      return fallback;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      this.log.warn({ tenant: tenant.host }, 'wallet-clients.json is not JSON; using the default client (file left as it is)');
      return fallback;
    }
    const r = walletClientsFile.safeParse(parsed);
    if (!r.success) {
      this.log.warn(
        { tenant: tenant.host, issue: r.error.issues[0]?.message },
        'wallet-clients.json does not match its schema; using the default client (file left as it is)',
      );
      return fallback;
    }
    return new Set(r.data.client_ids);
  }
}
