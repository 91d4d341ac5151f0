import { ERROR_CODES, ERROR_REASON_PARAMS, ERROR_REASONS } from './errors.ts';
import { z } from 'zod';
import type { RegisteredRoute } from './http/dispatch.ts';
import { parseAddress } from './http/dispatch.ts';
import type { AuthPolicy } from './auth.ts';
import type { DeclaredEvent } from './events.ts';

/** The API description's own version: a date plus a round label (spec "Versioning"). */
export const API_DESCRIPTION_VERSION = '2026-11-22.r1';

type Json = Record<string, unknown>;

function jsonSchema(s: z.ZodType, io: 'input' | 'output' = 'input'): Json {
  const out = z.toJSONSchema(s, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
  delete out.$schema;
  return out;
}

/** OpenAPI path key of an address: `:id` → `{id}`; a query verb stays as written. */
export function openapiPath(address: string): string {
  return address.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function security(p: AuthPolicy): Json[] | undefined {
  if (p.kind === 'public') return [];
  if (p.kind === 'custom') return [{ [p.verifier]: [] }];
  const out: Json[] = [];
  if (p.accept.includes('bearer')) out.push({ bearer: [] });
  if (p.accept.includes('apiKey')) out.push({ apiKey: [] });
  if (p.accept.includes('hmac')) out.push({ adminHmac: [] }, { adminHmacV2: [] });
  return out;
}

export function authText(p: AuthPolicy): string {
  if (p.kind === 'public') return 'none';
  if (p.kind === 'custom') return p.description;
  const parts = p.accept.map((a) => (a === 'bearer' ? 'B' : a === 'apiKey' ? 'K' : `H(${p.hmacBucket})`));
  return parts.join(' or ') + (p.superAdmin ? ', super-admin' : p.role === 'admin' ? ', role admin' : '');
}

const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: { type: 'string', enum: [...ERROR_CODES], description: 'stable error code (server/errors.ts ERROR_CODES)' },
    error_description: { type: 'string' },
    error_uri: { type: 'string', format: 'uri' },
    field: { type: 'string', description: 'the refused field, as a dotted path of the request (e.g. `redirect_uris.0`)' },
    issue: {
      type: 'object',
      description: 'why the field was refused, for a client to say it in its own language: the zod issue code and its bounds',
      required: ['code'],
      properties: {
        code: { type: 'string', description: 'too_small, too_big, invalid_format, invalid_value, invalid_type, custom, ...' },
        origin: { type: 'string', description: 'what was measured: string, number, array, ...' },
        minimum: { type: 'number' },
        maximum: { type: 'number' },
        format: { type: 'string', description: 'the expected format (url, email, regex, ...)' },
        expected: { type: 'string', description: 'the expected type' },
        values: { type: 'array', items: { type: ['string', 'number'] }, description: 'the allowed values' },
      },
    },
    reason: {
      type: 'string',
      enum: [...new Set(Object.values(ERROR_REASONS).flat())],
      description:
        'why a generic code was answered, stable and machine-readable (server/errors.ts ERROR_REASONS); the values each code may carry are listed in `x-reasons` and enforced below',
    },
    ...Object.fromEntries(
      Object.entries(ERROR_REASON_PARAMS)
        .filter(([k]) => k !== 'field')
        .map(([k, v]) => [k, { type: v.type, description: `reason parameter: ${v.description}` }]),
    ),
  },
  'x-reasons': ERROR_REASONS,
  allOf: Object.entries(ERROR_REASONS).map(([code, reasons]) => ({
    if: { properties: { error: { const: code } }, required: ['error'] },
    then: { properties: { reason: { enum: [...reasons] } } },
  })),
};

/**
 * OpenAPI 3.1 `webhooks`: one POST per declared event, its body the delivery envelope (spec
 * "Events: Delivery") around the data schema the emitting plugin declared, the very schema the
 * event bus validates every emit against (the data as emitted, hence `io: 'output'`).
 */
export function webhooksOf(events: readonly DeclaredEvent[]): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const e of events) {
    out[e.name] = {
      post: {
        operationId: `event_${e.name.replace(/[^A-Za-z0-9]+/g, '_')}`,
        summary: e.description || `${e.name} (declared by ${e.plugin})`,
        description: `Declared by the ${e.plugin} plugin. Delivered to subscriptions naming \`${e.name}\` or \`*\`, signed (X-Service-Signature, webhook-signature).`,
        tags: [e.plugin],
        parameters: [
          { name: 'X-Service-Event', in: 'header', required: true, schema: { type: 'string', const: e.name } },
          { name: 'X-Service-Signature', in: 'header', required: true, schema: { type: 'string' }, description: 'sha256=<hex HMAC-SHA256 of the raw body>' },
          { name: 'X-Service-Delivery-Id', in: 'header', required: true, schema: { type: 'string' }, description: 'stable across retries' },
          { name: 'X-Service-Attempt', in: 'header', required: true, schema: { type: 'string', enum: ['1', '2', '3', '4'] } },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['event', 'tenant', 'ts', 'data'],
                properties: {
                  event: { type: 'string', const: e.name },
                  tenant: { type: 'string', description: "the tenant's host name" },
                  ts: { type: 'string', format: 'date-time' },
                  data: jsonSchema(e.schema, 'output'),
                },
              },
            },
          },
        },
        responses: { '2XX': { description: 'received; anything else is retried (410 disables the subscription)' } },
      },
    };
  }
  return out;
}

export function buildOpenApi(routes: RegisteredRoute[], meta: { build: string; serverUrl?: string; events?: readonly DeclaredEvent[] }): Json {
  const paths: Record<string, Record<string, Json>> = {};
  const tags = new Set<string>();
  for (const r of routes) {
    const d = r.def;
    if (d.hidden) continue;
    const area = d.area ?? r.plugin;
    tags.add(area);
    r.addresses.forEach((address, i) => {
      const key = openapiPath(address);
      const a = parseAddress(address);
      const parameters: Json[] = [];
      for (const seg of a.segments) {
        if (!seg.startsWith(':')) continue;
        const name = seg.slice(1);
        const shape = (d.params as z.ZodObject | undefined)?.shape?.[name] as z.ZodType | undefined;
        parameters.push({ name, in: 'path', required: true, schema: shape ? jsonSchema(shape) : { type: 'string' } });
      }
      if (a.verbKey) {
        parameters.push({
          name: a.verbKey,
          in: 'query',
          required: true,
          schema: a.verbValue !== undefined ? { type: 'string', const: a.verbValue } : { type: 'string' },
          description: 'query verb selecting this operation',
        });
      }
      const q = d.query as z.ZodObject | undefined;
      if (q?.shape) {
        for (const [name, s] of Object.entries(q.shape as Record<string, z.ZodType>)) {
          if (name === a.verbKey) continue;
          const js = jsonSchema(s);
          parameters.push({
            name,
            in: 'query',
            required: !s.safeParse(undefined).success,
            schema: js,
            ...(s.description ? { description: s.description } : {}),
          });
        }
      }
      // The super-admin's tenant switch (server/http/dispatch.ts) applies to admin routes a bearer may call.
      if (d.auth.kind === 'credentials' && d.auth.role === 'admin' && d.auth.accept.includes('bearer'))
        parameters.push({ $ref: '#/components/parameters/TenantSwitch' });
      const op: Json = {
        operationId: `${d.method.toLowerCase()}${key.replace(/[^A-Za-z0-9]+/g, '_')}`,
        summary: d.summary,
        ...(d.description ? { description: d.description } : {}),
        tags: [area],
        parameters,
        security: security(d.auth),
        'x-auth': authText(d.auth),
        ...(d.auth.kind === 'credentials' && d.auth.hmacBucket ? { 'x-hmac-bucket': d.auth.hmacBucket } : {}),
        ...(i > 0 ? { 'x-alias-of': `${d.method} ${openapiPath(r.addresses[0]!)}` } : {}),
        responses: responses(r),
      };
      const bodyType = d.bodyType ?? (d.body ? 'json' : 'none');
      if (bodyType !== 'none') {
        const schema = d.body ? jsonSchema(d.body) : { type: 'string', format: 'binary' };
        const content: Json = {};
        if (bodyType === 'json' || bodyType === 'json-or-form') content['application/json'] = { schema };
        if (bodyType === 'form' || bodyType === 'json-or-form') content['application/x-www-form-urlencoded'] = { schema };
        if (bodyType === 'raw' || bodyType === 'stream')
          for (const ct of d.contentTypes ?? ['application/octet-stream']) content[ct] = { schema: { type: 'string', format: 'binary' } };
        op.requestBody = { required: !!d.body && !d.body.safeParse({}).success, content };
      }
      paths[key] ??= {};
      paths[key][d.method.toLowerCase()] = op;
    });
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sovereign Communications Appliance',
      version: API_DESCRIPTION_VERSION,
      description:
        'Multi-tenant on-prem communications appliance. Every path is tenant-scoped by the Host header. Query-verb paths (`/x.ashx?verb`) are written with their verb in the path key.',
      'x-build': meta.build,
    },
    ...(meta.serverUrl ? { servers: [{ url: meta.serverUrl }] } : {}),
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    ...(meta.events?.length ? { webhooks: webhooksOf(meta.events) } : {}),
    components: {
      schemas: { Error: errorSchema },
      parameters: {
        TenantSwitch: {
          name: 'X-Sovcomms-Tenant',
          in: 'header',
          required: false,
          schema: { type: 'string', maxLength: 253 },
          description:
            "A super-admin acts on another tenant: one of its host names. Only with a super-admin's own bearer (an admin of the primary tenant; not an ak_ key or the HMAC: 403), only on admin routes (others: 400 tenant_switch_not_allowed); an unknown host is 404. The target tenant's audit log names the caller as `name@primary-host`.",
        },
      },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'OIDC access token of this tenant' },
        apiKey: { type: 'http', scheme: 'bearer', description: 'personal API key with prefix ak_, in place of a bearer on v1' },
        adminHmac: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Service-Admin-Signature',
          description:
            "The spec's admin signature: hex HMAC-SHA256 with the admin shared secret of `bucket|Host` (every bucket, with or without a body), or of `bucket|Host|bodyLen`. The bucket is `x-hmac-bucket` of the operation; Host is the header as sent.",
        },
        adminHmacV2: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Service-Admin-Signature-V2',
          description:
            'Extension: `t=<unix seconds>,sig=<hex HMAC-SHA256 of "v2|bucket|Host|t|<hex SHA-256 of the body>">`. Refused outside ±5 minutes (401 stale_signature) and on a second use (401 replayed_signature). `sovcomms admin-secret sign BUCKET` prints it.',
        },
        credentialToken: { type: 'http', scheme: 'bearer', description: 'credential access token of the wallet issuer' },
      },
    },
  };
}

function responses(r: RegisteredRoute): Json {
  const d = r.def;
  const out: Json = {};
  const docs = d.responses ?? { 200: { description: 'OK' } };
  for (const [status, doc] of Object.entries(docs)) {
    out[status] = {
      description: doc.description,
      ...(doc.schema || doc.contentType ? { content: { [doc.contentType ?? 'application/json']: { schema: doc.schema ? jsonSchema(doc.schema) : {} } } } : {}),
    };
  }
  const err = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
  if (!out['400'] && (d.body || d.query || d.params)) out['400'] = err('bad input');
  if (d.auth.kind !== 'public') {
    out['401'] ??= err('missing or invalid credentials');
    out['403'] ??= err('authenticated but not privileged');
  }
  if (d.rateLimit !== false) out['429'] ??= err('rate limited (Retry-After)');
  return out;
}
