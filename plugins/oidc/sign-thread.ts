import crypto from 'node:crypto';
import { Worker } from 'node:worker_threads';

export type ToSignWorker =
  { t: 'key'; id: number; key: crypto.KeyObject; dsaEncoding?: 'ieee-p1363' | 'der' } | { t: 'sign'; seq: number; keys: number[]; inputs: string[] };
export type FromSignWorker =
  | { t: 'ready' }
  | {
      t: 'signed';
      seq: number;
      /** base64url signature per input, null where the thread could not sign it. */
      sigs: (string | null)[];
    };

interface Waiting {
  key: crypto.SignKeyObjectInput;
  input: string;
  resolve: (jws: string) => void;
  reject: (e: Error) => void;
}

export interface SignThreadOptions {
  /** Signatures within one second that start the thread (default 200). */
  startAfter?: number;
  /** The worker's entry (tests: one that fails or dies). */
  entry?: URL;
}

/**
 * JWS signatures (RFC 7515 §5.1) computed beside the event loop when the appliance is busy.
 *
 * At several thousand tokens a second the signature (ES256 about 27 µs here, RS256 more) is a
 * quarter of a token request's CPU, and the token endpoint was bound to one core. node:crypto's
 * callback form moves it to libuv's thread pool, but one job per signature wakes a pool thread and
 * the loop once each: about 20 µs more CPU per token, so the load generator and the pool fought
 * for the second core (bench/results/2026-12-06-vm-tokens.md). Here signatures go to one thread
 * of ours in batches, one message each way per batch, with one batch out at a time: the
 * signatures asked for in a turn of the event loop go at its check phase (setImmediate), and
 * those asked for while a batch is out go together when its answer comes. The busier the
 * endpoint, the larger the batches (bench/results/2026-12-06-vm-tokens-2.md).
 *
 * A quiet appliance signs on the event loop: no thread hop for a lone token, and no thread at all
 * in a CLI command or a test. The thread starts once `startAfter` signatures come within a second,
 * and signatures are made on the loop until it is up. It holds the process open only while it has
 * signatures to answer. If it cannot start or dies, signing stays on the loop from then on: the
 * bytes are the same either way (the same key, the same input).
 */
export class SignThread {
  readonly #startAfter: number;
  readonly #entry: URL | undefined;
  #w: Worker | undefined;
  #ready = false;
  #broken = false;
  #windowStart = 0;
  #inWindow = 0;
  #queue: Waiting[] = [];
  #scheduled = false;
  #seq = 0;
  readonly #inflight = new Map<number, Waiting[]>();
  readonly #ids = new WeakMap<crypto.KeyObject, number>();
  #nextId = 1;
  readonly #flush = () => this.#send();

  constructor(opts: SignThreadOptions = {}) {
    this.#startAfter = opts.startAfter ?? 200;
    this.#entry = opts.entry;
  }

  /** Whether signatures go to the thread now (for tests and diagnostics). */
  get threaded(): boolean {
    return this.#ready && !this.#broken;
  }

  /** The compact JWS: `input`, a dot, and its base64url signature (SHA-256 with `key`'s algorithm). */
  sign(key: crypto.SignKeyObjectInput, input: string): Promise<string> {
    if (!this.#ready) {
      if (!this.#broken && !this.#w) this.#count();
      return new Promise((resolve) => resolve(signHere(key, input)));
    }
    return new Promise((resolve, reject) => {
      this.#queue.push({ key, input, resolve, reject });
      // While a batch is out, what comes meanwhile waits for its answer and goes as the next one.
      if (!this.#scheduled && this.#inflight.size === 0) {
        this.#scheduled = true;
        setImmediate(this.#flush);
      }
    });
  }

  /** Stops the thread; later signatures are made on the event loop. */
  async close(): Promise<void> {
    this.#broken = true;
    this.#ready = false;
    const w = this.#w;
    this.#w = undefined;
    this.#settleAllHere();
    if (w) await w.terminate();
  }

  /** Counts a signature made on the loop; starts the thread past `startAfter` within a second. */
  #count(): void {
    const now = performance.now();
    if (now - this.#windowStart > 1000) {
      this.#windowStart = now;
      this.#inWindow = 0;
    }
    if (++this.#inWindow >= this.#startAfter) this.#start();
  }

  #start(): void {
    try {
      const ts = import.meta.url.endsWith('.ts');
      const boot = new URL('../../server/worker-boot.mjs', import.meta.url);
      const entry = (this.#entry ?? new URL(`./sign-worker${ts ? '.ts' : '.js'}`, import.meta.url)).href;
      const w = new Worker(boot, { workerData: { entry }, name: 'jws-sign' });
      w.unref();
      w.on('message', (m: FromSignWorker) => {
        if (m.t === 'ready') this.#ready = !this.#broken;
        else this.#answer(w, m);
      });
      w.on('error', () => this.#fail(w));
      w.on('exit', () => this.#fail(w));
      this.#w = w;
    } catch {
      this.#broken = true;
    }
  }

  #send(): void {
    this.#scheduled = false;
    if (this.#inflight.size > 0 || this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    const w = this.#w;
    if (!w || !this.#ready) {
      for (const b of batch) settleHere(b);
      return;
    }
    const keys = new Array<number>(batch.length);
    const inputs = new Array<string>(batch.length);
    for (let i = 0; i < batch.length; i++) {
      keys[i] = this.#keyId(w, batch[i]!.key);
      inputs[i] = batch[i]!.input;
    }
    const seq = ++this.#seq;
    // Held open while answers are owed: a CLI command's last token must not be left unsigned.
    if (this.#inflight.size === 0) w.ref();
    this.#inflight.set(seq, batch);
    const m: ToSignWorker = { t: 'sign', seq, keys, inputs };
    w.postMessage(m);
  }

  /** The thread's number for a key, sending the key (a KeyObject clones to a thread) the first time. */
  #keyId(w: Worker, k: crypto.SignKeyObjectInput): number {
    const key = k.key as crypto.KeyObject;
    let id = this.#ids.get(key);
    if (id === undefined) {
      id = this.#nextId++;
      this.#ids.set(key, id);
      const m: ToSignWorker = { t: 'key', id, key, ...(k.dsaEncoding ? { dsaEncoding: k.dsaEncoding } : {}) };
      w.postMessage(m);
    }
    return id;
  }

  #answer(w: Worker, m: Extract<FromSignWorker, { t: 'signed' }>): void {
    const batch = this.#inflight.get(m.seq);
    if (!batch) return;
    this.#inflight.delete(m.seq);
    if (this.#inflight.size === 0) w.unref();
    for (let i = 0; i < batch.length; i++) {
      const sig = m.sigs[i];
      if (sig) batch[i]!.resolve(`${batch[i]!.input}.${sig}`);
      else settleHere(batch[i]!);
    }
    this.#send();
  }

  /** The thread is gone: what it owed is signed here, and so is everything after. */
  #fail(w: Worker): void {
    if (this.#w !== w) return;
    this.#w = undefined;
    this.#broken = true;
    this.#ready = false;
    this.#settleAllHere();
  }

  #settleAllHere(): void {
    const owed = [...this.#inflight.values()].flat();
    this.#inflight.clear();
    for (const b of owed) settleHere(b);
    const queued = this.#queue;
    this.#queue = [];
    for (const b of queued) settleHere(b);
  }
}

function signHere(key: crypto.SignKeyObjectInput, input: string): string {
  return `${input}.${crypto.sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}

function settleHere(b: Waiting): void {
  try {
    b.resolve(signHere(b.key, b.input));
  } catch (e) {
    b.reject(e instanceof Error ? e : new Error(String(e)));
  }
}
