import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startTestServer, type TestServer } from '../support/server.ts';
import { probePlugin, withBuiltins } from './fixtures/test-plugins.ts';
import { openapiPath } from '../../server/openapi.ts';
import { parseAddress } from '../../server/http/dispatch.ts';

/**
 * The API description follows the code: every route any plugin registers (built-in plugins as
 * they are today and later, plus a test plugin) must be in /openapi.json and in the v1 root, and
 * the document must validate against the OpenAPI 3.1 schema. Generic over the dispatcher.
 */
interface Op {
  operationId: string;
  summary: string;
  parameters: { name: string; in: string; required?: boolean }[];
  security?: unknown[];
  responses: Record<string, unknown>;
  requestBody?: { content: Record<string, unknown> };
  'x-hmac-bucket'?: string;
}
interface Doc {
  openapi: string;
  info: { version: string; title: string };
  paths: Record<string, Record<string, Op>>;
}

let s: TestServer;
let doc: Doc;
beforeAll(async () => {
  s = await startTestServer({ plugins: await withBuiltins(probePlugin) });
  const r = await s.fetch('/openapi.json');
  expect(r.status).toBe(200);
  doc = (await r.json()) as Doc;
});
afterAll(async () => {
  await s?.stop();
});

const routes = () => s.appliance.dispatcher.routes.filter((r) => !r.def.hidden);

describe('OpenAPI description', () => {
  it('validates as OpenAPI 3.1 at /openapi.json and /.well-known/openapi.json (the same document)', async () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
    const v = new Validator();
    const res = await v.validate(doc as unknown as Record<string, unknown>);
    expect(res.errors ?? [], JSON.stringify(res.errors, null, 1)?.slice(0, 3000)).toEqual([]);
    expect(res.valid).toBe(true);
    expect(v.version).toBe('3.1');
    // The validator is not vacuous: a broken copy fails.
    const broken = structuredClone(doc) as unknown as { info: Record<string, unknown> };
    delete broken.info.title;
    expect((await new Validator().validate(broken as unknown as Record<string, unknown>)).valid).toBe(false);
    const wk = await s.fetch('/.well-known/openapi.json');
    expect(wk.status).toBe(200);
    expect(wk.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await wk.json()).toEqual(doc);
  });

  it("the Error schema lists each generic code's reasons, and a reason of another code does not validate", async () => {
    const { ERROR_REASONS } = await import('../../server/errors.ts');
    const { Ajv2020 } = await import('ajv/dist/2020.js');
    const schema = (doc as unknown as { components: { schemas: { Error: Record<string, unknown> } } }).components.schemas.Error;
    expect(schema['x-reasons']).toEqual(ERROR_REASONS);
    const validate = new Ajv2020({ strict: false, validateFormats: false }).compile(schema);
    expect(validate({ error: 'invalid_archive', error_description: 'x', reason: 'truncated' })).toBe(true);
    expect(validate({ error: 'invalid_csr', reason: 'bad_signature', field: 'csr' })).toBe(true);
    expect(validate({ error: 'invalid_csr', reason: 'truncated' })).toBe(false);
    expect(validate({ error: 'conflict', reason: 'prompt_exists', name: 'survey' })).toBe(true);
  });

  it('has a YYYY-MM-DD.rN version', () => {
    expect(doc.info.version).toMatch(/^\d{4}-\d{2}-\d{2}\.r\d+$/);
    expect(Number.isNaN(Date.parse(doc.info.version.slice(0, 10)))).toBe(false);
  });

  it('describes every registered route address with its method, parameters, body and auth', () => {
    const rs = routes();
    // The test plugin and the built-ins are both there: the check is not vacuous.
    expect(rs.some((r) => r.plugin === 'probe')).toBe(true);
    expect(rs.some((r) => r.plugin === 'audit')).toBe(true);
    const missing: string[] = [];
    for (const r of rs) {
      for (const address of r.addresses) {
        const op = doc.paths[openapiPath(address)]?.[r.def.method.toLowerCase()];
        if (!op) {
          missing.push(`${r.plugin}: ${r.def.method} ${address}`);
          continue;
        }
        expect(op.summary, address).toBe(r.def.summary);
        const a = parseAddress(address);
        for (const seg of a.segments.filter((x) => x.startsWith(':'))) {
          expect(
            op.parameters.some((p) => p.in === 'path' && p.name === seg.slice(1) && p.required),
            `${address} path parameter ${seg}`,
          ).toBe(true);
        }
        if (a.verbKey)
          expect(
            op.parameters.some((p) => p.in === 'query' && p.name === a.verbKey),
            `${address} verb`,
          ).toBe(true);
        if (r.def.body) expect(op.requestBody?.content, `${address} body`).toBeDefined();
        if (r.def.auth.kind !== 'public') {
          expect(op.security?.length, `${address} security`).toBeGreaterThan(0);
          expect(op.responses['401'], `${address} 401`).toBeDefined();
        } else {
          expect(op.security, `${address} public`).toEqual([]);
        }
        if (r.def.auth.kind === 'credentials' && r.def.auth.hmacBucket) expect(op['x-hmac-bucket']).toBe(r.def.auth.hmacBucket);
      }
    }
    expect(missing).toEqual([]);
  });

  it('HMAC routes offer the spec header and the V2 extension, both described', () => {
    const schemes = (doc as unknown as { components: { securitySchemes: Record<string, { name: string; description: string }> } }).components.securitySchemes;
    expect(schemes.adminHmac).toMatchObject({ name: 'X-Service-Admin-Signature', description: expect.stringContaining('`bucket|Host`') });
    expect(schemes.adminHmacV2).toMatchObject({ name: 'X-Service-Admin-Signature-V2', description: expect.stringContaining('stale_signature') });
    const op = doc.paths['/signal.ashx?test=echo']!.post!;
    expect(op.security).toEqual(expect.arrayContaining([{ adminHmac: [] }, { adminHmacV2: [] }]));
  });

  it('every operation has a unique operationId', () => {
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((o) => o.operationId));
    const dup = ids.filter((id, i) => ids.indexOf(id) !== i);
    expect(dup).toEqual([]);
  });

  it('describes nothing that is not registered', () => {
    const known = new Set(routes().flatMap((r) => r.addresses.map((a) => `${r.def.method.toLowerCase()} ${openapiPath(a)}`)));
    const extra = Object.entries(doc.paths)
      .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`))
      .filter((k) => !known.has(k));
    expect(extra).toEqual([]);
  });
});

describe('GET /api.ashx/v1 (public root)', () => {
  it('lists every registered endpoint with method, path, description, area and auth', async () => {
    const r = await s.fetch('/api.ashx/v1');
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const root = (await r.json()) as {
      name: string;
      version: string;
      build: string;
      auth: unknown;
      pagination: { limitDefault: number; limitMax: number };
      errors: unknown;
      endpoints: { method: string; path: string; description: string; area: string; auth: string }[];
    };
    expect(root.version).toBe('v1');
    expect(typeof root.name).toBe('string');
    expect(typeof root.build).toBe('string');
    expect(root.auth).toBeTruthy();
    expect(root.errors).toBeTruthy();
    expect(root.pagination).toMatchObject({ limitDefault: 50, limitMax: 500 });
    const listed = new Set(root.endpoints.map((e) => `${e.method} ${e.path}`));
    const missing = routes()
      .flatMap((rt) => rt.addresses.map((a) => `${rt.def.method} ${a}`))
      .filter((k) => !listed.has(k));
    expect(missing).toEqual([]);
    for (const e of root.endpoints) {
      expect(e.description, e.path).toBeTruthy();
      expect(e.area, e.path).toBeTruthy();
      expect(e.auth, e.path).toBeTruthy();
    }
  });

  it('lists every declared event under `webhooks` (OpenAPI 3.1): the delivery envelope around the declared data schema, with a description', () => {
    interface Body {
      required: string[];
      properties: { event: { const: string }; data: { properties: Record<string, unknown> } };
    }
    const webhooks = (doc as unknown as { webhooks: Record<string, { post: { summary: string; requestBody: { content: Record<string, { schema: Body }> } } }> })
      .webhooks;
    const declared = s.appliance.core.events.catalog();
    // The built-in plugins' events are there: the check is not vacuous.
    expect(declared.map((e) => e.name)).toEqual(expect.arrayContaining(['call.ended', 'transcript.share.viewed', 'presentation.verified', 'webhook.test']));
    expect(Object.keys(webhooks).sort()).toEqual(declared.map((e) => e.name));
    for (const e of declared) {
      expect(e.description, `${e.name} has a description`).not.toBe('');
      const op = webhooks[e.name]!.post;
      expect(op.summary).toBe(e.description);
      const body = op.requestBody.content['application/json']!.schema;
      expect(body.required).toEqual(['event', 'tenant', 'ts', 'data']);
      expect(body.properties.event.const).toBe(e.name);
      // The data schema is the one the event bus validates every emit against.
      const props = Object.keys((e.schema as unknown as { shape: Record<string, unknown> }).shape).sort();
      expect(Object.keys(body.properties.data.properties).sort(), e.name).toEqual(props);
    }
  });
});
