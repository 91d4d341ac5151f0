// Worker-thread entry for plugins' threads (e.g. plugins/lotl/check-worker). Loader hooks
// registered in the main thread (tsx) do not reach workers, so register them here when the real
// entry is TypeScript; the compiled app (dist/) passes a .js entry and needs none.
import { workerData } from 'node:worker_threads';

if (workerData.entry.endsWith('.ts')) {
  // As bin/sovcomms.mjs: plain-JavaScript dependencies the entry names are loaded before the
  // loader, so they skip its hooks (a round trip to the hooks thread each, on Node 20).
  await Promise.all((workerData.preload ?? []).map((m) => import(m)));
  const { register } = await import('tsx/esm/api');
  register();
}
await import(workerData.entry);
