import type { AnyPlugin, CliCommand } from '../plugin.ts';
import type { CliIo } from './io.ts';

/** What a core command gets beside its CliContext: the plugins this run loaded. */
export interface CoreCli {
  plugins: AnyPlugin[];
  /** Each part's schema version before this run opened the store (opening applies pending migrations); read for `opens: 'all'` commands only. */
  schemaBefore: Map<string, number>;
}

/**
 * A core `sovcomms` command: a CliCommand like a plugin's, plus what the run must open first.
 * `store`: the data dir with the core's migrations and the audit plugin (every change is audited);
 * `all`: every plugin migrated and set up (`migrate`, `doctor`); `nothing`: the command opens what
 * it needs itself (`serve` builds the whole appliance) and gets only the streams.
 */
export type CoreCommand =
  (CliCommand<CoreCli> & { opens: 'store' | 'all' }) | (Omit<CliCommand, 'run'> & { opens: 'nothing'; run(args: string[], io: CliIo): Promise<number> });
