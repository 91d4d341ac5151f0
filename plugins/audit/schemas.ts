import { z } from 'zod';
import { pageQuery } from '../../server/sdk.ts';
export const auditEntry = z.object({
  ts: z.string().describe('ISO 8601 UTC'),
  event: z.string(),
  tenant: z.string(),
  user: z.string(),
  ip: z.string(),
  ua: z.string(),
  extra: z.string().describe('free-form key=value tail'),
});

export const auditQuery = pageQuery.extend({
  event: z.string().max(200).optional().describe('case-insensitive substring of the event name'),
  user: z.string().max(200).optional().describe('case-insensitive substring of the subject or e-mail'),
  since: z.string().optional().describe('ISO 8601, parsed as UTC; only newer events'),
});

export const auditConfig = z
  .object({
    /** Entries older than this many days are deleted (0 keeps them forever). */
    retentionDays: z.number().int().min(0).default(400),
  })
  .strict();
