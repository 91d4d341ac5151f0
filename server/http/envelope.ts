import { z } from 'zod';

export const PAGE_DEFAULT = 50;
export const PAGE_MAX = 500;

/** `limit` and `offset` of every v1 collection: limit defaults to 50 and is capped at 500. */
export const pageQuery = z.object({
  limit: z.coerce.number().int().min(1).optional().describe('page size (default 50, capped at 500)'),
  offset: z.coerce.number().int().min(0).optional().describe('items to skip (default 0)'),
});

export interface Page {
  limit: number;
  offset: number;
}

export function pageOf(q: { limit?: number; offset?: number }): Page {
  return { limit: Math.min(q.limit ?? PAGE_DEFAULT, PAGE_MAX), offset: q.offset ?? 0 };
}

export interface Envelope<T> {
  data: T[];
  total: number;
  limit: number;
  offset: number;
  next: string | null;
}

/**
 * The list envelope. `next` is a relative URL to the following page (same path and filters,
 * offset moved on), or null on the last page.
 */
export function envelope<T>(data: T[], total: number, page: Page, selfUrl: string, extra: Record<string, unknown> = {}): Envelope<T> & Record<string, unknown> {
  let next: string | null = null;
  if (page.offset + data.length < total && data.length > 0) {
    const u = new URL(selfUrl, 'http://x');
    u.searchParams.set('limit', String(page.limit));
    u.searchParams.set('offset', String(page.offset + page.limit));
    next = u.pathname + u.search;
  }
  return { data, total, limit: page.limit, offset: page.offset, next, ...extra };
}

/** JSON Schema-ish zod description of an envelope of `item`, for the OpenAPI description. */
export function envelopeSchema<T extends z.ZodType>(item: T, extra: z.ZodRawShape = {}) {
  return z.object({
    data: z.array(item),
    total: z.number().int(),
    limit: z.number().int(),
    offset: z.number().int(),
    next: z.string().nullable(),
    ...extra,
  });
}
