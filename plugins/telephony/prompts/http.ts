/** The v1 prompts API (README "Prompts"): the same as `sovcomms prompt add|list|remove`. */
import { z } from 'zod';
import { envelope, envelopeSchema, pageOf, pageQuery, policy, reply, type RouteRegistrar } from '../../../server/sdk.ts';
import { actor, audited, err, V1 } from '../http-common.ts';
import type { TelephonyServices } from '../services.ts';
import { PROMPT_MAX_CHARS } from './prompts.ts';

export const promptView = z.object({ slug: z.string(), text: z.string(), createdBy: z.string(), createdAtUtc: z.string(), updatedAtUtc: z.string() });
const slugParam = z.object({ slug: z.string().min(1).max(64) });
const text = z.string().min(1).max(PROMPT_MAX_CHARS);

export function promptHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  r.add({
    method: 'GET',
    path: `${V1}/prompts`,
    area: 'prompts',
    auth: policy.v1Admin,
    summary: "The tenant's prompts, by slug: a call's systemPrompt may name one",
    query: pageQuery,
    responses: { 200: { description: 'list envelope of prompts', schema: envelopeSchema(promptView) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const rows = svc.prompts.list(req.tenant);
      return envelope(rows.slice(page.offset, page.offset + page.limit), rows.length, page, req.raw.originalUrl);
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/prompts/:slug`,
    area: 'prompts',
    auth: policy.v1Admin,
    summary: 'One prompt',
    params: slugParam,
    responses: { 200: { description: 'prompt', schema: promptView }, 404: err('not_found') },
    handler: (req) => svc.prompts.get(req.tenant, req.params.slug),
  });
  r.add({
    method: 'POST',
    path: `${V1}/prompts`,
    area: 'prompts',
    auth: policy.v1Admin,
    summary: 'Add a prompt (slug: 1-64 of a-z, 0-9, - and _, starting and ending with a letter or digit)',
    body: z.object({ slug: z.string().min(1).max(64), text }),
    responses: {
      201: { description: 'created prompt', schema: promptView },
      400: err('invalid_request naming slug or text'),
      409: err('conflict (the slug exists); tenant_limit (limits.prompts)'),
    },
    handler: (req) => {
      const out = svc.prompts.save(req.tenant, req.body.slug, req.body.text, actor(req), false);
      return reply(201, audited(svc, req, 'prompt-save', { slug: out.prompt.slug, created: true }, out.prompt));
    },
  });
  r.add({
    method: 'PUT',
    path: `${V1}/prompts/:slug`,
    area: 'prompts',
    auth: policy.v1Admin,
    summary: "Replace a prompt's text, or add it",
    params: slugParam,
    body: z.object({ text }),
    responses: {
      200: { description: 'prompt', schema: promptView },
      400: err('invalid_request naming slug or text'),
      409: err('tenant_limit (limits.prompts)'),
    },
    handler: (req) => {
      const out = svc.prompts.save(req.tenant, req.params.slug, req.body.text, actor(req), true);
      return audited(svc, req, 'prompt-save', { slug: out.prompt.slug, created: out.created }, out.prompt);
    },
  });
  r.add({
    method: 'DELETE',
    path: `${V1}/prompts/:slug`,
    area: 'prompts',
    auth: policy.v1Admin,
    summary: 'Remove a prompt (calls created with it keep its text)',
    params: slugParam,
    responses: { 200: { description: '{deleted: prompt}', schema: z.object({ deleted: promptView }) }, 404: err('not_found') },
    handler: (req) => {
      const gone = svc.prompts.remove(req.tenant, req.params.slug);
      return audited(svc, req, 'prompt-remove', { slug: gone.slug }, { deleted: gone });
    },
  });
}
