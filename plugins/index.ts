import type { AnyPlugin } from '../server/sdk.ts';

/** A built-in plugin, loaded on demand, and the `sovcomms` commands its manifest adds. */
export interface BuiltinPlugin {
  name: string;
  /**
   * The keys of its manifest's `cli` (a test holds the two equal): the CLI finds a command's
   * plugin here and loads only that one and its dependencies, not all of them.
   */
  commands: readonly string[];
  load(): Promise<AnyPlugin>;
}

/** The built-in plugins, in no particular order: the host sorts them by dependency. */
export const BUILTIN_PLUGINS: readonly BuiltinPlugin[] = [
  { name: 'audit', commands: [], load: async () => (await import('./audit/index.ts')).default },
  { name: 'rp-ca', commands: ['ca'], load: async () => (await import('./rp-ca/index.ts')).default },
  { name: 'oidc', commands: ['client'], load: async () => (await import('./oidc/index.ts')).default },
  { name: 'webhooks', commands: ['webhook'], load: async () => (await import('./webhooks/index.ts')).default },
  { name: 'telephony', commands: ['trunk', 'number', 'phone', 'prompt', 'route'], load: async () => (await import('./telephony/index.ts')).default },
  { name: 'lotl', commands: ['lotl'], load: async () => (await import('./lotl/index.ts')).default },
  { name: 'admin', commands: [], load: async () => (await import('./admin/index.ts')).default },
  { name: 'console', commands: [], load: async () => (await import('./console/index.ts')).default },
  { name: 'discovery', commands: ['discover'], load: async () => (await import('./discovery/index.ts')).default },
  { name: 'chat', commands: [], load: async () => (await import('./chat/index.ts')).default },
  { name: 'wallet-issuer', commands: ['issuer'], load: async () => (await import('./wallet-issuer/index.ts')).default },
  { name: 'wallet-verifier', commands: ['verifier'], load: async () => (await import('./wallet-verifier/index.ts')).default },
];

/** Every built-in plugin, loaded one after the other in the order above. */
export async function builtinPlugins(): Promise<AnyPlugin[]> {
  const out: AnyPlugin[] = [];
  for (const p of BUILTIN_PLUGINS) out.push(await p.load());
  return out;
}
