// Worker-thread entry for plugins' threads (e.g. plugins/lotl/check-worker). Loader hooks
// registered in the main thread (tsx) do not reach workers, so register them here when the real
// entry is TypeScript; the compiled app (dist/) passes a .js entry and needs none.
import { workerData } from 'node:worker_threads';

if (workerData.entry.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(workerData.entry);
