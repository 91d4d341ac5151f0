import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { policy } from '../auth.ts';
import { AppError, type ErrorReason, InputError, NotFoundError } from '../errors.ts';
import { reply, type RouteDef } from '../http/route.ts';
import type { AnyPlugin } from '../plugin.ts';
import { ArchiveError, ARCHIVE_EXT, keyFromPassphrase, keyFromRecoveryKey, newRecoveryKey } from './archive.ts';
import { defaultTarget, listArchives, type BackupService } from './service.ts';
import { pendingRestoreDir, stageRestore, applyStaged } from './restore.ts';

const V1 = '/api.ashx/v1/backups';
const AREA = 'backups';
/** Server-made names only: an archive's (`sovcomms-...`) or an upload's (`upload-...`). */
const NAME = /^(sovcomms|upload)-\d{8}-\d{6}Z-[0-9a-f]{4}\.sovbak$/;
/** The largest archive the console may upload (64 GiB: far past any office's data dir, but bounded). */
const MAX_UPLOAD = 64 * 1024 ** 3;

const stateSchema = z.object({
  configured: z.boolean(),
  schedule: z.object({ every: z.string(), everyMs: z.number(), keep: z.number(), target: z.string() }).nullable(),
  defaultTarget: z.string(),
  lastSuccess: z.object({ at: z.string(), file: z.string(), bytes: z.number(), trigger: z.string() }).nullable(),
  lastFailure: z.object({ at: z.string(), reason: z.string(), trigger: z.string() }).nullable(),
  nextRun: z.string().nullable(),
  health: z.enum(['ok', 'failing', 'overdue', 'unconfigured']),
});
const archiveSchema = z.object({
  name: z.string(),
  bytes: z.number(),
  created: z.string(),
  state: z.enum(['complete', 'partial', 'unreadable']),
  protection: z.enum(['passphrase', 'recovery-key']).nullable(),
  schema: z.record(z.string(), z.number()).nullable(),
});
const nameParams = z.object({ name: z.string().regex(NAME, 'an archive name as listed') });
const secretBody = z
  .object({
    passphrase: z.string().min(8).max(1024).optional(),
    recoveryKey: z.string().max(200).optional(),
  })
  .strict();

/** Keeps each definition's own schema types for its handler (an array literal would widen them). */
function route<Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType, P extends z.ZodType = z.ZodType>(def: RouteDef<Q, B, P>): RouteDef {
  return def as unknown as RouteDef;
}

/** The stable cause of a failed backup from the file system's error code (ENOSPC: the disk is full). */
function backupFailure(e: unknown): ErrorReason<'backup_failed'> {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC' || code === 'EDQUOT') return 'disk_full';
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS' || code === 'ENOTDIR' || code === 'EEXIST' || code === 'EISDIR') return 'not_writable';
  return 'failed';
}

function toApi(e: unknown): never {
  if (e instanceof ArchiveError) throw e.toAppError();
  throw e;
}

/**
 * The console's backups (super-admin only): state, list, create, download, upload and restore.
 * A restore from the console is staged (the whole archive checked, the database checked and
 * migrated in a folder of the data dir) and applied at the appliance's next start, before the
 * store opens: a running server never has its database swapped under it.
 */
export function backupRoutes(backups: BackupService, dataDir: string, plugins: () => AnyPlugin[], now: () => number): RouteDef[] {
  const target = () => path.resolve(backups.schedule()?.target ?? defaultTarget(dataDir));
  const fileOf = (name: string) => path.join(target(), name);
  const auth = policy.superAdmin();
  return [
    route({
      method: 'GET',
      path: `${V1}/status`,
      summary: 'Backup state: schedule and target, last success, last failure with its reason, next run',
      description: 'The same state `/readyz` (`backup`) and `sovcomms backup status` show.',
      area: AREA,
      auth,
      responses: { 200: { description: 'the backup state', schema: stateSchema } },
      handler: () => backups.state(),
    }),
    route({
      method: 'GET',
      path: V1,
      summary: 'Archives in the backup target, newest first (time, size, state), and a restore waiting for the next start',
      area: AREA,
      auth,
      responses: {
        200: { description: 'archives', schema: z.object({ target: z.string(), data: z.array(archiveSchema), pendingRestore: z.boolean() }) },
      },
      handler: async () => ({
        target: target(),
        data: (await listArchives(target())).filter((a) => NAME.test(a.name)).map(({ file: _file, ...a }) => a),
        pendingRestore: fs.existsSync(pendingRestoreDir(dataDir)),
      }),
    }),
    route({
      method: 'POST',
      path: V1,
      summary: 'Makes a backup now, while the appliance serves',
      description:
        'With `passphrase` the archive is protected by it (scrypt); without, by the schedule’s key when a schedule is set, else by a new recovery key returned once in `recoveryKey` (keep it: it is never shown again).',
      area: AREA,
      auth,
      body: secretBody.omit({ recoveryKey: true }),
      responses: {
        201: { description: 'made', schema: z.object({ name: z.string(), bytes: z.number(), files: z.number(), recoveryKey: z.string().optional() }) },
        409: { description: 'backup_in_progress' },
        503: { description: 'backup_failed: the reason (disk full, target not writable)' },
      },
      rateLimit: 'sensitive',
      handler: async (req) => {
        let recoveryKey: string | undefined;
        let key = req.body.passphrase ? await keyFromPassphrase(req.body.passphrase) : backups.storedKey();
        if (!key) {
          recoveryKey = newRecoveryKey();
          key = keyFromRecoveryKey(recoveryKey);
        }
        try {
          const made = await backups.create({ key, trigger: 'api' });
          return reply(201, { name: made.name, bytes: made.bytes, files: made.files, ...(recoveryKey ? { recoveryKey } : {}) });
        } catch (e) {
          if (e instanceof ArchiveError && e.code === 'unsupported') throw new AppError(409, 'backup_in_progress', e.message);
          throw new AppError(503, 'backup_failed', `backup failed: ${(e as Error).message}`, { reason: backupFailure(e) });
        }
      },
    }),
    route({
      method: 'GET',
      path: `${V1}/:name`,
      summary: 'Downloads one archive (streamed; it stays encrypted)',
      area: AREA,
      auth,
      params: nameParams,
      responses: { 200: { description: 'the archive', contentType: 'application/octet-stream' }, 404: { description: 'not_found' } },
      handler: async (req, res) => {
        const file = fileOf(req.params.name);
        let st: fs.Stats;
        try {
          st = await fsp.stat(file);
        } catch {
          throw new NotFoundError(`no archive ${req.params.name}`);
        }
        res.setHeader('Content-Type', 'application/octet-stream');
        res.setHeader('Content-Disposition', `attachment; filename="${req.params.name}"`);
        res.setHeader('Content-Length', String(st.size));
        res.setHeader('Cache-Control', 'no-store');
        res.setHeader('X-Content-Type-Options', 'nosniff');
        try {
          await pipeline(fs.createReadStream(file), res);
        } catch (e) {
          if (!res.destroyed && (e as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') throw e;
        }
      },
    }),
    route({
      method: 'POST',
      path: `${V1}/upload`,
      summary: 'Uploads an archive (the raw bytes, streamed to the backup target) to restore from',
      description: 'Answers its name (`upload-...sovbak`); nothing is checked or restored yet: POST .../{name}/restore does that.',
      area: AREA,
      auth,
      bodyType: 'stream',
      contentTypes: ['application/octet-stream'],
      responses: { 201: { description: 'stored', schema: z.object({ name: z.string(), bytes: z.number() }) }, 413: { description: 'payload_too_large' } },
      handler: async (req) => {
        const dir = target();
        fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
        const t = new Date(now()).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
        const name = `upload-${t}Z-${crypto.randomBytes(2).toString('hex')}${ARCHIVE_EXT}`;
        const part = path.join(dir, `${name}.part`);
        const declared = Number(req.headers['content-length'] ?? NaN);
        if (Number.isFinite(declared) && declared > MAX_UPLOAD) throw new AppError(413, 'payload_too_large', `archive over ${MAX_UPLOAD} bytes`);
        let bytes = 0;
        const out = fs.createWriteStream(part, { flags: 'wx', mode: 0o600 });
        try {
          await pipeline(
            req.raw,
            async function* (src: AsyncIterable<Buffer>) {
              for await (const c of src) {
                bytes += c.length;
                if (bytes > MAX_UPLOAD) throw new AppError(413, 'payload_too_large', `archive over ${MAX_UPLOAD} bytes`);
                yield c;
              }
            },
            out,
          );
          if (!req.raw.complete) throw new InputError('upload incomplete: the client closed the connection');
          fs.renameSync(part, path.join(dir, name));
        } catch (e) {
          fs.rmSync(part, { force: true });
          throw e;
        }
        return reply(201, { name, bytes });
      },
    }),
    route({
      method: 'POST',
      path: `${V1}/:name/restore`,
      summary: 'Checks an archive whole and stages it to replace this appliance’s data at its next start',
      description:
        'Give `passphrase` or `recoveryKey`. The archive is decrypted into a folder of the data dir, every chunk and the database’s integrity checked, the migrations run; only then is it staged. Restart the appliance to apply it (the current data is kept under restore/previous-<time>). A refused archive (wrong secret, damaged, truncated) answers 400 invalid_archive and changes nothing.',
      area: AREA,
      auth,
      params: nameParams,
      body: secretBody,
      rateLimit: 'sensitive',
      responses: {
        200: {
          description: 'staged',
          schema: z.object({
            staged: z.literal(true),
            created: z.string(),
            build: z.string(),
            migrated: z.array(z.string()),
            applyAt: z.literal('next start'),
          }),
        },
        400: { description: 'invalid_archive: wrong passphrase or recovery key, damaged, altered or truncated' },
        404: { description: 'not_found' },
      },
      handler: async (req) => {
        const file = fileOf(req.params.name);
        if (!fs.existsSync(file)) throw new NotFoundError(`no archive ${req.params.name}`);
        if (!req.body.passphrase === !req.body.recoveryKey) throw new InputError('give exactly one of passphrase and recoveryKey');
        const pending = pendingRestoreDir(dataDir);
        fs.mkdirSync(path.dirname(pending), { recursive: true, mode: 0o700 });
        fs.rmSync(pending, { recursive: true, force: true });
        const staged = await stageRestore(file, pending, { passphrase: req.body.passphrase, recoveryKey: req.body.recoveryKey }, plugins()).catch(toApi);
        applyStaged(staged, pending, now());
        return { staged: true as const, created: staged.header.created, build: staged.header.build, migrated: staged.migrated, applyAt: 'next start' as const };
      },
    }),
  ];
}
