import fs from 'node:fs';
import path from 'node:path';
import { parse, str, table, UsageError, withParses, type ParsedArgs } from '../cli-args.ts';
import { defaultDataDir } from '../config.ts';
import { ArchiveError, keyFromPassphrase, keyFromRecoveryKey, newRecoveryKey, type BackupKey } from '../backup/archive.ts';
import { applyStaged, holdsData, stageRestore, type ArchiveSecret } from '../backup/restore.ts';
import { defaultTarget, listArchives, parseEvery, readBackupState, type BackupService, type BackupState } from '../backup/service.ts';
import type { DB } from '../store/db.ts';
import { systemClock } from '../clock.ts';
import { loadBuiltinPlugins } from '../core.ts';
import { auditCliChange } from './audit.ts';
import type { CoreCommand } from './command.ts';
import type { CliIo } from './io.ts';
import { builtinPluginSource, openForCli, withDependencies } from './open.ts';

const USAGE = [
  'backup create [--to DIR] [--passphrase-stdin]',
  'backup restore FILE [--passphrase-stdin | --recovery-key-stdin] [--yes]',
  'backup list [--to DIR] [--json]',
  'backup schedule --every 24h --keep 14 [--to DIR] [--passphrase-stdin] | backup schedule show [--json] | backup schedule clear',
  'backup status [--json]',
];

/** One secret from standard input: the text up to its end, less one trailing line break. */
async function secretFromStdin(io: CliIo, what: string): Promise<string> {
  const s = (await io.stdin()).replace(/\r?\n$/, '');
  if (!s) throw new UsageError(`${what}: standard input is empty`);
  return s;
}

/** A passphrase from stdin, or a new recovery key printed once (the only secret this command ever prints). */
async function newKey(io: CliIo, fromStdin: boolean): Promise<BackupKey> {
  if (fromStdin) return keyFromPassphrase(await secretFromStdin(io, '--passphrase-stdin'));
  const rk = newRecoveryKey();
  io.out('Recovery key (shown once; keep it apart from the backups, without it they cannot be restored):');
  io.out(`  ${rk}`);
  return keyFromRecoveryKey(rk);
}

/** Asks on the terminal (not stdin, which may carry the passphrase); no terminal: no consent. */
function confirmOnTty(question: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync('/dev/tty', 'r+');
  } catch {
    return false;
  }
  try {
    fs.writeSync(fd, `${question} [type yes] `);
    const buf = Buffer.alloc(64);
    const n = fs.readSync(fd, buf, 0, buf.length, null);
    return buf.subarray(0, n).toString('utf8').trim().toLowerCase() === 'yes';
  } catch {
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

export function printState(io: Pick<CliIo, 'out'>, s: BackupState): void {
  io.out(
    s.schedule
      ? `schedule   every ${s.schedule.every}, keep ${s.schedule.keep}, to ${s.schedule.target}`
      : 'schedule   none (sovcomms backup schedule --every 24h --keep 14 --to DIR)',
  );
  io.out(`health     ${s.health}`);
  io.out(`last ok    ${s.lastSuccess ? `${s.lastSuccess.at}  ${s.lastSuccess.file} (${s.lastSuccess.bytes} bytes, ${s.lastSuccess.trigger})` : 'never'}`);
  io.out(`last fail  ${s.lastFailure ? `${s.lastFailure.at}  ${s.lastFailure.reason} (${s.lastFailure.trigger})` : 'never'}`);
  io.out(`next run   ${s.nextRun ?? '-'}`);
}

/**
 * `sovcomms backup ...`. It opens the data dir itself: `restore` must not create or migrate
 * anything in its target before the archive has verified (the other subcommands open the store
 * as every command does, with the audit plugin).
 */
export const backupCommand: CoreCommand = {
  opens: 'nothing',
  summary: 'Encrypted backups of the whole data dir: create, restore, list, schedule',
  usage: USAGE,
  changes: ['create', 'schedule'],
  audited: ['to', 'every', 'keep'],
  async run(args, io) {
    const [sub, ...rest] = args;
    switch (sub) {
      case 'restore':
        return restore(rest, io);
      case 'create':
      case 'list':
      case 'schedule':
      case 'status':
        return withStore(sub, rest, io);
      default:
        throw new UsageError(`backup: unknown subcommand ${sub ?? '(none)'}; one of create, restore, list, schedule, status`);
    }
  },
};

async function withStore(sub: 'create' | 'list' | 'schedule' | 'status', rest: string[], io: CliIo): Promise<number> {
  const dataDir = path.resolve(
    str(
      parse(rest, {
        to: { type: 'string' },
        json: { type: 'boolean' },
        'passphrase-stdin': { type: 'boolean' },
        every: { type: 'string' },
        keep: { type: 'string' },
      }).values['data-dir'],
    ) ?? defaultDataDir(),
  );
  const source = builtinPluginSource();
  const o = await openForCli(dataDir, io, await withDependencies(source, ['audit']));
  try {
    const ctx = o.ctx(null, io);
    const b = o.core.backups;
    const { result, parses } = await withParses(async (): Promise<number> => {
      switch (sub) {
        case 'create': {
          const { values } = parse(rest, { to: { type: 'string' }, 'passphrase-stdin': { type: 'boolean' } }, 0);
          const key = await newKey(io, values['passphrase-stdin'] === true);
          const made = await b.create({ key, to: str(values.to), trigger: 'cli' });
          ctx.out(`backup ${made.file} written: ${made.bytes} bytes, ${made.files} files, ${Math.round(made.ms)} ms`);
          return 0;
        }
        case 'list': {
          const { values } = parse(rest, { to: { type: 'string' }, json: { type: 'boolean' } }, 0);
          const dir = path.resolve(str(values.to) ?? b.schedule()?.target ?? defaultTarget(dataDir));
          const list = await listArchives(dir);
          if (values.json) ctx.out(JSON.stringify(list, null, 2));
          else if (!list.length) ctx.out(`no archives in ${dir}`);
          else
            for (const l of table(
              list.map((a) => ({ ...a, protection: a.protection ?? '' })),
              ['name', 'created', 'bytes', 'state', 'protection'],
            ))
              ctx.out(l);
          return 0;
        }
        case 'status': {
          const { values } = parse(rest, { json: { type: 'boolean' } }, 0);
          const s = readBackupState(o.core.db, dataDir, o.core.clock.now());
          if (values.json) ctx.out(JSON.stringify(s, null, 2));
          else printState(ctx, s);
          return 0;
        }
        case 'schedule':
          return schedule(rest, io, o.core.backups, dataDir, o.core.clock.now(), o.core.db);
      }
    });
    if (result === 0) auditCliChange(o, 'backup', backupCommand, [sub, ...rest], parses);
    return result;
  } catch (e) {
    if (e instanceof ArchiveError) throw e.toAppError();
    throw e;
  } finally {
    o.close();
  }
}

async function schedule(rest: string[], io: CliIo, b: BackupService, dataDir: string, now: number, db: DB): Promise<number> {
  if (rest[0] === 'show') {
    const { values } = parse(rest.slice(1), { json: { type: 'boolean' } }, 0);
    const s = readBackupState(db, dataDir, now);
    if (values.json) io.out(JSON.stringify(s, null, 2));
    else printState(io, s);
    return 0;
  }
  if (rest[0] === 'clear') {
    parse(rest.slice(1), {}, 0);
    io.out(b.clearSchedule() ? 'backup schedule cleared' : 'no backup schedule was set');
    return 0;
  }
  const { values } = parse(rest, { every: { type: 'string' }, keep: { type: 'string' }, to: { type: 'string' }, 'passphrase-stdin': { type: 'boolean' } }, 0);
  if (!values.every || !values.keep) throw new UsageError('backup schedule: --every and --keep are required (or: schedule show, schedule clear)');
  let everyMs: number;
  try {
    everyMs = parseEvery(String(values.every));
  } catch (e) {
    throw new UsageError(`--every: ${(e as Error).message}`);
  }
  const keep = Number(values.keep);
  if (!Number.isInteger(keep) || keep < 1 || keep > 10_000) throw new UsageError(`--keep: a whole number from 1, got ${String(values.keep)}`);
  const target = path.resolve(str(values.to) ?? defaultTarget(dataDir));
  const key = await newKey(io, values['passphrase-stdin'] === true);
  b.setSchedule({ everyMs, keep, target }, key);
  const s = readBackupState(db, dataDir, now);
  io.out(`backups every ${s.schedule?.every}, keeping ${keep}, to ${target}; next run ${s.nextRun} (by the running server)`);
  return 0;
}

async function restore(rest: string[], io: CliIo): Promise<number> {
  const { values, positionals }: ParsedArgs = parse(
    rest,
    { 'passphrase-stdin': { type: 'boolean' }, 'recovery-key-stdin': { type: 'boolean' }, yes: { type: 'boolean' } },
    1,
  );
  const file = positionals[0];
  if (!file) throw new UsageError('backup restore: FILE is required');
  if (values['passphrase-stdin'] && values['recovery-key-stdin']) throw new UsageError('--passphrase-stdin and --recovery-key-stdin exclude each other');
  if (!values['passphrase-stdin'] && !values['recovery-key-stdin'])
    throw new UsageError('backup restore: give the secret on standard input: --passphrase-stdin or --recovery-key-stdin');
  const target = path.resolve(str(values['data-dir']) ?? defaultDataDir());
  // Refused before reading anything: an existing data dir is replaced only with consent.
  if (holdsData(target) && values.yes !== true && !confirmOnTty(`Replace the data dir ${target} (it is kept as ${target}.pre-restore-<time>)?`))
    throw new UsageError(`${target} holds a data dir: stop the appliance and confirm with --yes to replace it (the old one is kept beside it)`);
  const secret: ArchiveSecret = values['passphrase-stdin']
    ? { passphrase: await secretFromStdin(io, '--passphrase-stdin') }
    : { recoveryKey: await secretFromStdin(io, '--recovery-key-stdin') };
  let staged;
  try {
    staged = await stageRestore(path.resolve(file), target, secret, await loadBuiltinPlugins());
  } catch (e) {
    if (e instanceof ArchiveError) {
      io.err(`sovcomms: restore refused, ${target} unchanged: ${e.message}`);
      return 1;
    }
    throw e;
  }
  const kept = applyStaged(staged, target, systemClock.now());
  io.out(`restored ${staged.files} files from ${path.basename(file)} (made ${staged.header.created}, build ${staged.header.build}) into ${target}`);
  if (staged.migrated.length) io.out(`migrated forward: ${staged.migrated.join(', ')}`);
  if (kept) io.out(`the previous data dir is kept at ${kept}`);
  io.out(
    `the master key is in ${path.join(target, 'master.key')} (0600); an appliance that takes its key from SOVCOMMS_MASTER_KEY or the OS key store needs that value there`,
  );
  return 0;
}
