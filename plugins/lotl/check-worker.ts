/** The list-check thread (ListChecker in check.ts): one national list per message. */
import { parentPort } from 'node:worker_threads';
import { checkNationalList, type SignerSet } from './check.ts';

parentPort!.on('message', (m: { id: number; bytes: Uint8Array; expectedTerritory?: string; sets: SignerSet[] }) => {
  try {
    parentPort!.postMessage({ id: m.id, result: checkNationalList(m.bytes, m.expectedTerritory, m.sets) });
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: (e as Error)?.message ?? String(e) });
  }
});
