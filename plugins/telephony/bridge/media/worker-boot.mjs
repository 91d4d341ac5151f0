// Worker-thread entry for the media thread. Loader hooks registered in the main thread (tsx)
// do not reach workers, so register them here when the real entry is TypeScript.
import { workerData } from 'node:worker_threads';

if (workerData.entry.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(workerData.entry);
