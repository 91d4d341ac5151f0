import { ApiError } from '../api/client.ts';
import { accessToken } from '../auth.ts';
import { tenantHeaders } from '../tenant.ts';

/**
 * Saves what an API address answers as a file (a CSV export, a certificate). A plain link cannot
 * do it: the API wants the bearer token, which lives in memory, never in a cookie.
 */
export async function download(path: string, filename: string): Promise<void> {
  const token = await accessToken();
  const headers: Record<string, string> = { ...tenantHeaders(path.split('?')[0]!) };
  if (token) headers.Authorization = `Bearer ${token}`;
  const r = await fetch(path, { headers });
  if (!r.ok) {
    const e = (await r.json().catch(() => ({}))) as { error?: string; error_description?: string };
    throw new ApiError(r.status, e.error ?? 'error', e.error_description ?? `HTTP ${r.status}`);
  }
  const url = URL.createObjectURL(await r.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** An API address with these query parameters (empty ones left out). */
export function withQuery(path: string, q: Record<string, string | number | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `${path}${path.includes('?') ? '&' : '?'}${s}` : path;
}
