import { AsyncLocalStorage } from 'node:async_hooks';
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** A bad command line: the CLI prints it and exits 2. */
export class UsageError extends Error {}

export type CliOptions = NonNullable<ParseArgsConfig['options']>;

export interface ParsedArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/**
 * parseArgs with the appliance's conventions: strict, `--data-dir` accepted everywhere, usage
 * errors naming the argument. Lives apart from server/cli.ts so plugin commands can use it without
 * importing the CLI (which imports the app, which imports the plugins).
 */
export function parse(args: string[], options: CliOptions, maxPositionals = Infinity): ParsedArgs {
  try {
    const r = parseArgs({ args, options: { 'data-dir': { type: 'string' }, ...options }, allowPositionals: true, strict: true }) as ParsedArgs;
    if (r.positionals.length > maxPositionals) throw new UsageError(`unexpected argument: ${r.positionals[maxPositionals]}`);
    parsed.getStore()?.push(r);
    return r;
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError((e as Error).message.replace(/\. To specify.*$/s, ''));
  }
}

const parsed = new AsyncLocalStorage<ParsedArgs[]>();

/**
 * Runs a command and hands back what its own parse() calls read, last one last: the CLI audits a
 * change from the command's parse of its arguments, not from a second reading of them.
 */
export async function withParses<T>(run: () => Promise<T>): Promise<{ result: T; parses: ParsedArgs[] }> {
  const parses: ParsedArgs[] = [];
  const result = await parsed.run(parses, run);
  return { result, parses };
}

/** A string option's value, or undefined for a flag or an absent option. */
export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** Rows as an aligned text table: a header line, then one line per row, each a whole line. */
export function table(rows: Record<string, unknown>[], cols: string[]): string[] {
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- table cells are strings and numbers; printed as they print
  const w = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(w[i]!))
      .join('  ')
      .trimEnd();
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- table cells are strings and numbers; printed as they print
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => String(r[c] ?? ''))))];
}
