/**
 * The signing thread's side (see sign-thread.ts): keys arrive once each, then batches of JWS
 * signing inputs; each batch is answered with one message, in order.
 */
import crypto from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import type { FromSignWorker, ToSignWorker } from './sign-thread.ts';

const keys = new Map<number, crypto.SignKeyObjectInput>();
const port = parentPort!;

port.on('message', (m: ToSignWorker) => {
  if (m.t === 'key') {
    keys.set(m.id, m.dsaEncoding ? { key: m.key, dsaEncoding: m.dsaEncoding } : { key: m.key });
    return;
  }
  const sigs: (string | null)[] = new Array<string | null>(m.inputs.length);
  for (let i = 0; i < m.inputs.length; i++) {
    const key = keys.get(m.keys[i]!);
    try {
      sigs[i] = key ? crypto.sign('sha256', Buffer.from(m.inputs[i]!), key).toString('base64url') : null;
    } catch {
      sigs[i] = null;
    }
  }
  const answer: FromSignWorker = { t: 'signed', seq: m.seq, sigs };
  port.postMessage(answer);
});

const ready: FromSignWorker = { t: 'ready' };
port.postMessage(ready);
