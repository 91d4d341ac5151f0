/** The list-check thread (ListChecker in check.ts): one LOTL or national list per message. */
import { parentPort } from 'node:worker_threads';
import { runCheck, type CheckJob } from './check.ts';

parentPort!.on('message', (m: CheckJob & { id: number }) => {
  try {
    parentPort!.postMessage({ id: m.id, result: runCheck(m) });
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: (e as Error)?.message ?? String(e) });
  }
});
