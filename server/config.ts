import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors.ts';

/**
 * Appliance configuration: embedded defaults, then `<data-dir>/config.json`, then `SOVCOMMS_*`
 * environment variables, then command-line flags. Validated once at start; a bad value stops the
 * start naming the key's path and the reason. Plugin sections (`plugins.<name>`) are validated by
 * each plugin's own schema when the plugin host loads it.
 */
export const coreConfigSchema = z
  .object({
    dataDir: z.string().min(1),
    http: z
      .object({
        host: z.string().min(1).default('127.0.0.1'),
        port: z.number().int().min(0).max(65535).default(8080),
        /** Body size cap for every route that does not set its own. */
        bodyLimitBytes: z
          .number()
          .int()
          .positive()
          .default(1024 * 1024),
        /** Trust X-Forwarded-For from these proxies (express `trust proxy` value). */
        trustProxy: z.union([z.boolean(), z.string(), z.number()]).default(false),
        tls: z.union([z.literal('auto'), z.object({ cert: z.string().min(1), key: z.string().min(1) }).strict()]).optional(),
        /** Grace period for in-flight requests at shutdown. */
        drainMs: z.number().int().min(0).default(5000),
        /** Open connections in all; the last `loopbackReserve` of them are kept for loopback peers (console, health checks). */
        maxConnections: z.number().int().min(16).default(4096),
        loopbackReserve: z.number().int().min(0).default(64),
        /** Open connections per client address (loopback is not counted). */
        maxConnectionsPerIp: z.number().int().min(1).default(256),
        /** Open long-lived streams (WebSockets, Server-Sent Events) in all; past it they are refused with 503. */
        maxStreams: z.number().int().min(1).default(3072),
        /** Open streams per client address (loopback is not counted), past it 429: the rest of its connection share stays for requests. */
        maxStreamsPerIp: z.number().int().min(1).default(192),
        /** A connection that sends no byte within this time is closed (a silent socket holds a descriptor). */
        firstByteTimeoutMs: z.number().int().min(100).default(10_000),
        /**
         * An admin-signed (V2) body larger than this is hashed into a file of the data dir instead
         * of memory until its signature checks: a bogus signature never costs RAM.
         */
        spoolAboveBytes: z
          .number()
          .int()
          .min(1024)
          .default(1024 * 1024),
        /** Signed bodies over `spoolAboveBytes` read at once; more answer 503 with Retry-After. */
        maxLargeSignedBodies: z.number().int().min(1).default(2),
      })
      .strict()
      .prefault({}),
    /** Host name of the primary tenant created on first start. */
    primaryHost: z.string().min(1).default('localhost'),
    log: z
      .object({
        level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      })
      .strict()
      .prefault({}),
    rateLimit: z
      .object({
        /** Requests per minute and IP on public (unauthenticated) endpoints. */
        publicPerMinute: z.number().int().positive().default(600),
        /** Requests per minute and credential (key, token subject or HMAC) on authenticated endpoints. */
        authenticatedPerMinute: z.number().int().positive().default(6000),
        /** Failed authentications per minute and IP; past it, more failures answer 429 (valid credentials still pass). */
        failedAuthPerMinute: z.number().int().positive().default(120),
        /** Requests per minute and IP on sensitive endpoints (sign-in, claim, offers). */
        sensitivePerMinute: z.number().int().positive().default(30),
        /** Admin-signed (HMAC) requests per minute and IP, charged before their body is read. */
        signedPerMinute: z.number().int().positive().default(600),
      })
      .strict()
      .prefault({}),
    store: z
      .object({
        busyTimeoutMs: z.number().int().min(0).default(5000),
        checkpointMs: z.number().int().min(1000).default(60_000),
      })
      .strict()
      .prefault({}),
    jobs: z
      .object({
        pollMs: z.number().int().min(10).default(500),
        leaseMs: z.number().int().min(1000).default(60_000),
      })
      .strict()
      .prefault({}),
    /**
     * `GET /metrics` (Prometheus text format; server/metrics.ts). With `port` set it is served on
     * that separate listener (`host`, default loopback) and not on the public one.
     */
    metrics: z
      .object({
        enabled: z.boolean().default(true),
        host: z.string().min(1).default('127.0.0.1'),
        port: z.number().int().min(0).max(65535).optional(),
      })
      .strict()
      .prefault({}),
    /**
     * LAN advertisement over mDNS (plugins/discovery): true, false, or unset: on when `http.host`
     * is not a loopback address.
     */
    discovery: z.boolean().optional(),
    /** Plugins not to load (by name). */
    disabledPlugins: z.array(z.string()).default([]),
    /** Per-plugin settings, validated by each plugin. */
    plugins: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();

export type CoreConfig = z.infer<typeof coreConfigSchema>;
export type ConfigInput = Record<string, unknown>;

/** Environment variables the appliance reads (names are a contract: keep them). */
export const ENV = {
  dataDir: 'SOVCOMMS_DATA_DIR',
  host: 'SOVCOMMS_HOST',
  port: 'SOVCOMMS_PORT',
  logLevel: 'SOVCOMMS_LOG_LEVEL',
  primaryHost: 'SOVCOMMS_PRIMARY_HOST',
  masterKey: 'SOVCOMMS_MASTER_KEY',
  /** A JSON object merged over config.json, for settings without an env var of their own. */
  configJson: 'SOVCOMMS_CONFIG_JSON',
} as const;

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env[ENV.dataDir] || './data');
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Deep merge of plain objects; arrays and scalars of `over` replace those of `base`. */
export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) continue;
    const b = out[k];
    out[k] = isPlainObject(b) && isPlainObject(v) ? deepMerge(b, v) : v;
  }
  return out;
}

function envLayer(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const layer: Record<string, unknown> = {};
  const http: Record<string, unknown> = {};
  if (env[ENV.host]) http.host = env[ENV.host];
  if (env[ENV.port]) {
    const n = Number(env[ENV.port]);
    if (!Number.isInteger(n)) throw new ConfigError('http.port', `${ENV.port} is not an integer: ${env[ENV.port]}`);
    http.port = n;
  }
  if (Object.keys(http).length) layer.http = http;
  if (env[ENV.logLevel]) layer.log = { level: env[ENV.logLevel] };
  if (env[ENV.primaryHost]) layer.primaryHost = env[ENV.primaryHost];
  if (env[ENV.configJson]) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(env[ENV.configJson] as string);
    } catch {
      throw new ConfigError('', `${ENV.configJson} is not valid JSON`);
    }
    if (!isPlainObject(parsed)) throw new ConfigError('', `${ENV.configJson} must be a JSON object`);
    return deepMerge(parsed, layer);
  }
  return layer;
}

export function formatZodPath(p: readonly PropertyKey[]): string {
  return p.map((s) => String(s)).join('.');
}

/** Validates `input` against `schema`, throwing ConfigError with the first issue's path. */
export function parseConfigSection<S extends z.ZodType>(schema: S, input: unknown, prefix = ''): z.infer<S> {
  // jitless: a configuration is parsed once, at start; zod's fast path would first generate and
  // compile a function per object schema (parsing took ~25 ms of a start with it, ~6 without: CPU
  // profile), which only pays off for schemas parsed again and again (request bodies keep it).
  const r = schema.safeParse(input, { jitless: true });
  if (!r.success) {
    const issue = r.error.issues[0]!;
    // An unknown key is reported at its own path (`http.prot`), not at its parent's.
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
    const p = [prefix, formatZodPath([...issue.path, ...keys.slice(0, 1)])].filter(Boolean).join('.');
    throw new ConfigError(p, keys.length ? `unknown key${keys.length > 1 ? `s ${keys.join(', ')}` : ''}` : issue.message);
  }
  return r.data;
}

export interface LoadConfigOptions {
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Highest layer: command-line flags or a test's overrides. */
  overrides?: Record<string, unknown>;
}

export function loadConfig(opts: LoadConfigOptions = {}): CoreConfig {
  const env = opts.env ?? process.env;
  const dataDir = path.resolve(opts.dataDir ?? defaultDataDir(env));
  let fileLayer: Record<string, unknown> = {};
  const file = path.join(dataDir, 'config.json');
  if (fs.existsSync(file)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      throw new ConfigError('', `${file} is not valid JSON: ${(e as Error).message}`);
    }
    if (!isPlainObject(parsed)) throw new ConfigError('', `${file} must hold a JSON object`);
    fileLayer = parsed;
  }
  let merged = deepMerge(fileLayer, envLayer(env));
  merged = deepMerge(merged, opts.overrides ?? {});
  merged.dataDir = dataDir;
  return parseConfigSection(coreConfigSchema, merged);
}
