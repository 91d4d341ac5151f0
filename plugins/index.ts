import type { PluginManifest } from '../server/plugin.ts';
import audit from './audit/index.ts';

/** The built-in plugins, in no particular order: the host sorts them by dependency. */
export function builtinPlugins(): PluginManifest[] {
  return [audit].map((make) => make() as unknown as PluginManifest);
}
