import os from 'node:os';
import type { ParsedArgs } from '../cli-args.ts';
import type { CliCommand } from '../plugin.ts';
import type { Opened } from './open.ts';

/** Whether these arguments are one of the invocations the command declares as changing data. */
export function changesData(command: Pick<CliCommand, 'changes'>, args: string[]): boolean {
  return subcommandIn(command.changes, args);
}

/** Whether the arguments start with one of the subcommands listed (`true`/`false`: any, none). */
export function subcommandIn(list: boolean | readonly string[], args: string[]): boolean {
  if (typeof list === 'boolean') return list;
  return list.some((sub) => {
    const words = sub.split(' ');
    return words.every((w, i) => args[i] === w);
  });
}

/**
 * Every change made with the CLI is audited like one made over HTTP: the actor is `cli:<OS user>`
 * (the console machine's account), the tenant the one the command named (else the primary), the
 * target its positional arguments and the options the command declares `audited`. Passwords,
 * PINs, keys and secrets given on the command line never reach the log (no command declares them,
 * and the audit writer drops secret-looking keys too).
 */
export function auditCliChange(o: Opened, name: string, command: Pick<CliCommand, 'changes' | 'audited'>, args: string[], parses: ParsedArgs[]): void {
  if (!changesData(command, args)) return;
  const [sub = '', ...rest] = args;
  // The command's own reading of its arguments (its last parse(), the subcommand's); a command
  // that reads them by hand (lotl import PATH...) has its words as the target.
  const last = parses.at(-1) ?? { values: {}, positionals: rest.filter((a) => !a.startsWith('--')) };
  const extra: Record<string, string> = {};
  for (const flag of command.audited ?? []) {
    const v = last.values[flag];
    if (v !== undefined) extra[flag] = String(v);
  }
  if (last.positionals.length) extra.target = last.positionals.join(' ');
  let osUser = process.env.USER ?? '';
  try {
    osUser = os.userInfo().username;
  } catch {
    // No passwd entry (a container's numeric user): $USER, or unknown.
  }
  let tenant;
  try {
    tenant = o.core.tenants.require(extra.tenant);
  } catch {
    tenant = o.core.tenants.primary();
  }
  if (!tenant) return;
  try {
    o.core.audit.write(tenant, { event: `cli-${name}${sub ? `-${sub}` : ''}`.slice(0, 64), user: `cli:${osUser || 'unknown'}`, extra });
  } catch (e) {
    // The change is made; a failing audit write is reported, not turned into a failed command.
    o.core.log.warn({ err: (e as Error).message, cmd: name, sub }, 'audit entry for a CLI change not written');
  }
}
