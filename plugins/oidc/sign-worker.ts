/**
 * The signing thread's side (see sign-thread.ts): keys arrive once each, then batches of JWS
 * signing inputs; each batch is answered with one message, in order. For P-256 keys it also
 * makes ES256 presignatures on request (es256-presign.ts).
 */
import crypto from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { isP256PrivateKey, presign, privateScalar, type Presig } from './es256-presign.ts';
import type { FromSignWorker, ToSignWorker } from './sign-thread.ts';

const keys = new Map<number, crypto.SignKeyObjectInput>();
/** Private scalars of the P-256 keys presignatures were asked for. */
const scalars = new Map<number, bigint>();
const port = parentPort!;

port.on('message', (m: ToSignWorker) => {
  if (m.t === 'key') {
    keys.set(m.id, m.dsaEncoding ? { key: m.key, dsaEncoding: m.dsaEncoding } : { key: m.key });
    return;
  }
  if (m.t === 'presign') {
    const presigs: Presig[] = [];
    try {
      let d = scalars.get(m.id);
      const key = keys.get(m.id)?.key as crypto.KeyObject | undefined;
      if (d === undefined && key && isP256PrivateKey(key)) scalars.set(m.id, (d = privateScalar(key)));
      if (d !== undefined) presigs.push(...presign(d, m.count));
    } catch {
      // None made: the loop's pool stays empty and its signatures come here in batches.
    }
    const answer: FromSignWorker = { t: 'presigned', id: m.id, presigs };
    port.postMessage(answer);
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
