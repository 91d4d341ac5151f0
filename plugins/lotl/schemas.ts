import { z } from 'zod';
import type { LotlRepo } from './repo.ts';
import type { RefreshSchedule } from './schedule.ts';
import type { LotlService } from './service.ts';

/** Settings under `plugins.lotl` in config.json. */
export const lotlConfig = z.object({
  /** Where the EU LOTL is published (Commission Implementing Decision (EU) 2015/1505). */
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
  lotlUrl: z.string().url().default('https://ec.europa.eu/tools/lotl/eu-lotl.xml'),
  /**
   * A mirror that serves `eu-lotl.xml` and `<CC>_TSL_<CC>.xml` (the layout of the public mirror
   * our fixtures come from) plus pivot LOTLs by file name. When set, every list is fetched from
   * here instead of the URLs the LOTL names; the signature checks are exactly the same.
   */
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
  mirrorBaseUrl: z.string().url().optional(),
  /** PEM file with the LOTL signer set; default `resources/lotl/lotl-signers.pem`. */
  signersPath: z.string().min(1).optional(),
  /** Serve anchors of lists whose NextUpdate has passed, or that are closed (default: keep them out). */
  acceptExpired: z.boolean().default(false),
  autoRefresh: z.boolean().default(true),
  refreshIntervalHours: z
    .number()
    .positive()
    .max(24 * 31)
    .default(24),
  /**
   * When a scheduled refresh cannot fetch the LOTL (network down, upstream failing), the next
   * try comes after these delays in turn, the last one repeating, never later than
   * refreshIntervalHours; a run that fetched the LOTL goes back to the interval.
   */
  retryMinutes: z
    .array(
      z
        .number()
        .positive()
        .max(24 * 60),
    )
    .min(1)
    .default([5, 15, 60, 240]),
  /** First scheduled refresh when no LOTL is stored yet. */
  firstRefreshDelayMinutes: z
    .number()
    .min(0)
    .max(24 * 60)
    .default(10),
  /** Upper bound of one refresh (the spec's POST ?refresh blocks 20 to 60 s). */
  refreshBudgetMs: z.number().int().min(1000).max(300_000).default(50_000),
  fetchTimeoutMs: z.number().int().min(500).max(120_000).default(20_000),
  fetchConcurrency: z.number().int().min(1).max(16).default(4),
  maxListBytes: z
    .number()
    .int()
    .min(1024)
    .max(256 * 1024 * 1024)
    .default(32 * 1024 * 1024),
  /**
   * 'always' (issue 6: health is degraded when anchors are zero): a fresh appliance without
   * trusted lists says so in /readyz. 'after-first-run': only once a list was stored or an
   * operator imported or refreshed.
   */
  degradedWhenEmpty: z.enum(['always', 'after-first-run']).default('always'),
});
export type LotlConfig = z.infer<typeof lotlConfig>;

export const anchorsQuery = z.object({
  anchors: z.string().optional(),
  country: z
    .string()
    .regex(/^[A-Za-z]{2}$/, 'a two-letter country code (ISO 3166-1, or EL/UK as trusted lists write them)')
    .optional(),
});

export const anchorQuery = z.object({
  anchor: z.string().regex(/^[0-9a-fA-F]{64}$/, 'a hex SHA-256 fingerprint of the certificate DER'),
});

/**
 * Why a list was not accepted, as the import and refresh reports and the status's last attempt
 * give it (`lists[].reason`): a stable code the console puts into words (en, de); `detail` is the
 * English technical detail beside it. Adding a reason means adding its words to both locales
 * (test/renderer/trust-reasons.test.ts checks).
 */
export const LIST_REASONS = [
  'older_lotl',
  'timeout',
  'network_error',
  'not_a_lotl',
  'unexpected_lotl',
  'territory_mismatch',
  'not_pointed',
  'older_sequence',
  'not_checked',
  'verification_error',
  'malformed_xml',
  'doctype_refused',
  'encoding',
  'bad_list',
  'no_signature',
  'multiple_signatures',
  'signature_not_root_child',
  'duplicate_ids',
  'bad_structure',
  'unsupported_algorithm',
  'digest_mismatch',
  'signer_not_pinned',
  'signing_certificate_mismatch',
  'signature_invalid',
] as const;
export type ListReason = (typeof LIST_REASONS)[number];

export const listOutcome = z.object({
  name: z.string(),
  territory: z.string().nullable(),
  outcome: z.enum(['accepted', 'unchanged', 'rejected', 'failed', 'skipped']),
  reason: z.enum(LIST_REASONS).optional(),
  detail: z.string().optional(),
  signature: z.enum(['valid', 'untrusted_signer', 'invalid', 'not_checked']),
  sequence: z.number().int().optional(),
  stale: z.boolean().optional(),
  services: z.number().int().optional(),
});

export const runReport = z.object({
  kind: z.enum(['import', 'refresh']),
  started_at: z.string(),
  finished_at: z.string(),
  duration_ms: z.number(),
  lists: z.array(listOutcome),
  accepted: z.number().int(),
  rejected: z.number().int(),
  anchor_count: z.number().int(),
  countries_covered: z.array(z.string()),
});

const lastAttempt = z.object({
  at: z.string(),
  outcome: z.string(),
  reason: z.string().nullable(),
  detail: z.string().nullable(),
  signature: z.string(),
  source: z.string(),
  sequence: z.number().nullable(),
  issued: z.string().nullable(),
  next_update: z.string().nullable(),
});

export const listStatus = z.object({
  territory: z.string(),
  kind: z.enum(['lotl', 'tl']),
  /** A verified copy is stored. */
  stored: z.boolean(),
  in_service: z.boolean(),
  stale: z.boolean(),
  closed: z.boolean(),
  signature: z.string(),
  signature_algorithm: z.string().nullable(),
  signer_sha256: z.string().nullable(),
  sequence: z.number().nullable(),
  issued: z.string().nullable(),
  next_update: z.string().nullable(),
  source: z.string().nullable(),
  accepted_at: z.string().nullable(),
  tsp_count: z.number().nullable(),
  service_count: z.number().nullable(),
  last_attempt: lastAttempt.nullable(),
});

/** The spec's LotlManifest plus per-list detail. */
export const manifest = z.object({
  // Described with .describe(), not comments: /openapi.json carries these texts (spec LotlManifest
  // has as_of and next_refresh_at as date-times; null and `state` are our documented extension).
  state: z
    .enum(['never-loaded', 'current', 'stale'])
    .describe(
      'Extension. never-loaded: no trusted list was ever stored (as_of is null until an import or refresh runs, and stays so named after runs that stored nothing); stale: a stored list is past its NextUpdate; current otherwise.',
    ),
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
  as_of: z.string().datetime().nullable().describe('When the last import or refresh run ended (date-time, UTC); null before the first run (see state).'),
  next_refresh_at: z
    .string()
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
    .datetime()
    .nullable()
    .describe('When the scheduled refresh runs next (date-time, UTC); null when none is queued: auto_refresh off, or a refresh running.'),
  auto_refresh: z.boolean().describe('Extension. Whether scheduled refreshes run at all (plugins.lotl.autoRefresh); false explains a null next_refresh_at.'),
  /** Scheduled refreshes in a row that could not fetch the LOTL (0 after a good one). */
  refresh_failures: z.number().int(),
  anchor_count: z.number().int(),
  countries_covered: z.array(z.string()),
  lotl_sequence: z.number().nullable(),
  countries_missing: z.array(z.string()),
  lists: z.array(listStatus),
});
export type Manifest = z.infer<typeof manifest>;
export type RunReport = z.infer<typeof runReport>;
export type ListOutcome = z.infer<typeof listOutcome>;

export const anchorItem = z.object({
  sha256: z.string(),
  /** ISO 3166-1 alpha-2 (GR for Greece). */
  country: z.string(),
  /** The trusted list's own SchemeTerritory (EL for Greece). */
  territory: z.string(),
  tsp_name: z.string(),
  service_name: z.string(),
  service_type: z.string(),
  status: z.string(),
  status_since: z.string(),
});

/** What setup builds; routes, the refresh job and `sovcomms lotl` share it. */
export interface LotlServices {
  repo: LotlRepo;
  service: LotlService;
  schedule: RefreshSchedule;
  config: LotlConfig;
}
