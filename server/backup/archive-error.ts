import { AppError, type ErrorReason } from '../errors.ts';

/*
 * The archive's name and its refusal, apart from the format code (archive.ts, which re-exports
 * both): the backup service every command and start builds needs only these until it reads or
 * writes an archive.
 */

export const ARCHIVE_EXT = '.sovbak';

/** A clear, stable refusal of an archive (bad passphrase, damage, truncation): exit 1 or 400, never a stack. */
/** Damaged and altered are one to the archive (its authentication failed): `tampered` to the API. */
const ARCHIVE_REASON: Record<ArchiveError['code'], ErrorReason<'invalid_archive'>> = {
  wrong_key: 'wrong_key',
  damaged: 'tampered',
  truncated: 'truncated',
  not_an_archive: 'not_an_archive',
  unsupported: 'unsupported_version',
};

export class ArchiveError extends Error {
  constructor(
    readonly code: 'wrong_key' | 'damaged' | 'truncated' | 'not_an_archive' | 'unsupported',
    message: string,
  ) {
    super(message);
  }

  /** 400 invalid_archive with the stable reason of the API (ERROR_REASONS.invalid_archive). */
  toAppError(): AppError<'invalid_archive'> {
    return new AppError(400, 'invalid_archive', this.message, { reason: ARCHIVE_REASON[this.code] });
  }
}
