/**
 * The plugin SDK: the one module a plugin imports from the core (a boundary test enforces it).
 * Everything a plugin needs from the core is named here, so the core's file layout can change
 * without touching a plugin, and a reader sees the whole contract in one place.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The manifest, its context and the CLI contract.
export { boundedCounts, definePlugin, defineService } from './plugin.ts';
export type {
  AnyPlugin,
  AuditInput,
  AuditWriter,
  CliCommand,
  CliContext,
  Paths,
  PluginContext,
  MetricFamily,
  PluginHealth,
  PluginManifest,
  ServiceRef,
} from './plugin.ts';
export { AUDIT_WRITER, TLS_AUTO, type TlsAutoProvider } from './core-services.ts';
export { UsageError, parse, str, table, type CliOptions, type ParsedArgs } from './cli-args.ts';

// P-256 signing keys in software or in a PKCS#11 token (one module registry per process).
export { HsmError, Pkcs11Signer, SoftwareSigner, probeToken, type HsmConfig, type Signer } from './p256-signer.ts';

// Errors with stable codes (rendered by the one error middleware).
export {
  AppError,
  AuthenticationError,
  BadGatewayError,
  ConflictError,
  ERROR_CODES,
  InputError,
  NotAllowedError,
  NotFoundError,
  RateLimitedError,
  ServiceUnavailableError,
  zodMessage,
  type ErrorCode,
  type ErrorReason,
} from './errors.ts';

// Routes: registration, auth policies, replies, list envelopes, key case.
export { bearerToken, policy, requireBodyless } from './auth.ts';
export type { ApiKeyInfo, AuthPolicy, AuthService, Principal } from './auth.ts';
export { reply } from './http/route.ts';
export type { PreRouterHandler, Reply, RouteDef, RouteRegistrar, RouteRequest, UpgradeContext, UpgradeHandler } from './http/route.ts';
export { envelope, envelopeSchema, pageOf, pageQuery, type Envelope, type Page } from './http/envelope.ts';
export { MAX_JSON_DEPTH, nestsDeeperThan, pascalizeKeys } from './http/key-case.ts';
export { queryObject } from './http/address.ts';
export { readBounded } from './http/body.ts';
export { csvHeaders, toCsv, CSV_MAX_ROWS, type CsvCell } from './http/csv.ts';
export { errorAnswer, newRequestId, peerAddress, RandomPool, rejectUpgrade, SECURITY_HEADERS, type ErrorAnswer } from './http/respond.ts';
export type { RateLimiter } from './http/rate-limit.ts';
// Browser flows: cookies, and pages rendered by the server (escaping, shell, hashed-style CSP).
export * as cookies from './http/cookies.ts';
export * as html from './http/html.ts';

// Storage, jobs and events.
export { sqlMigrations, type Migration } from './store/migrate.ts';
export type { DB } from './store/db.ts';
export { dataVersionOf, type DataVersion } from './store/data-version.ts';
export { PermanentFailure, RetryAt } from './jobs.ts';
export type { JobDefinition, JobQueue, RunningJob } from './jobs.ts';
export type { AppEvent, DeclaredEvent, EventBus } from './events.ts';
export { describeEvents } from './events.ts';

// Tenancy, users, keys, time, logs, build.
export type { Tenant, TenantService } from './tenancy.ts';
export { publicOriginOf } from './tenancy.ts';
export { checkPasswordPolicy, generatePassword, verifyPassword, type Role, type User, type UserService, type UserLanguage, type UserStatus } from './users.ts';
export { safeEqual, sha256Hex, type KeyService, type SecretSettings } from './keys.ts';
export type { Clock } from './clock.ts';
export type { Logger } from './log.ts';
export { BUILD } from './build-info.ts';

const RESOURCES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'resources');

/**
 * A file or folder shipped in `resources/` (defaults an operator may restyle or replace). Segments
 * are fixed names from the code; anything that climbs out of the folder throws.
 */
export function resourcePath(...segments: string[]): string {
  const p = path.resolve(RESOURCES, ...segments);
  if (p !== RESOURCES && !p.startsWith(RESOURCES + path.sep)) throw new Error(`resource path escapes resources/: ${segments.join('/')}`);
  return p;
}

/** The appliance's backup state (schedule, target, last runs): for a plugin that shows it, e.g. a setup checklist. */
export { readBackupState, type BackupState } from './backup/service.ts';
