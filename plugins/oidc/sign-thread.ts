import crypto from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { finishSignature, isP256PrivateKey, type Presig } from './es256-presign.ts';

export type ToSignWorker =
  | { t: 'key'; id: number; key: crypto.KeyObject; dsaEncoding?: 'ieee-p1363' | 'der' }
  | { t: 'sign'; seq: number; keys: number[]; inputs: string[] }
  /** `count` ES256 presignatures for key `id` (es256-presign.ts). */
  | { t: 'presign'; id: number; count: number };
export type FromSignWorker =
  | { t: 'ready' }
  | { t: 'presigned'; id: number; presigs: Presig[] }
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

/** A P-256 key's presignatures on the event loop's side; each is taken once, with pop(). */
interface Pool {
  id: number;
  presigs: Presig[];
  /** A request for more is out. */
  asked: boolean;
  /** How many the next request asks for: grows while the key is busy, up to PRESIGN_BATCH. */
  next: number;
}

/** Presignatures asked for at most at once, and the pool size under which more are asked for. */
const PRESIGN_BATCH = 256;
const PRESIGN_LOW = 128;

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
 *
 * ES256 keys (P-256) go one step further once the thread is up: the thread makes presignatures
 * for each busy key ahead of need, a few hundred per message, and the loop finishes a token's
 * signature from one of them in about 3 µs (es256-presign.ts), with no hop per token. While a
 * key's pool is empty (its first tokens, or a burst faster than the thread), its signatures go
 * to the thread in batches as above. ECDSA signatures are randomized, so these bytes differ from
 * node:crypto's for the same input, as two node:crypto signatures do; each verifies the same.
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
  /** Per key: its presignature pool, or null for a key presignatures cannot sign for (not P-256). */
  readonly #pools = new WeakMap<crypto.KeyObject, Pool | null>();
  readonly #poolsById = new Map<number, Pool>();
  #presigned = 0;
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

  /** Signatures finished from presignatures so far (for tests and diagnostics). */
  get presigned(): number {
    return this.#presigned;
  }

  /** The compact JWS: `input`, a dot, and its base64url signature (SHA-256 with `key`'s algorithm). */
  sign(key: crypto.SignKeyObjectInput, input: string): Promise<string> {
    if (!this.#ready) {
      if (!this.#broken && !this.#w) this.#count();
      return new Promise((resolve) => resolve(signHere(key, input)));
    }
    if (key.dsaEncoding === 'ieee-p1363') {
      const p = this.#presig(key);
      const sig = p && finishSignature(input, p);
      if (sig) {
        this.#presigned++;
        return Promise.resolve(`${input}.${sig}`);
      }
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
    this.#dropPools();
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
        else if (m.t === 'presigned') this.#restock(m);
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

  /**
   * One presignature for `key`, taken out of its pool for good, or undefined when there is none
   * (or the key is not P-256). Asks the thread for more when the pool runs low.
   */
  #presig(k: crypto.SignKeyObjectInput): Presig | undefined {
    const key = k.key as crypto.KeyObject;
    let pool = this.#pools.get(key);
    if (pool === undefined) {
      const w = this.#w;
      if (!w) return undefined;
      pool = isP256PrivateKey(key) ? { id: this.#keyId(w, k), presigs: [], asked: false, next: 16 } : null;
      this.#pools.set(key, pool);
      if (pool) this.#poolsById.set(pool.id, pool);
    }
    if (!pool) return undefined;
    const p = pool.presigs.pop();
    if (!pool.asked && pool.presigs.length < PRESIGN_LOW && this.#w) {
      pool.asked = true;
      const m: ToSignWorker = { t: 'presign', id: pool.id, count: pool.next };
      this.#w.postMessage(m);
      pool.next = Math.min(pool.next * 2, PRESIGN_BATCH);
    }
    return p;
  }

  #restock(m: Extract<FromSignWorker, { t: 'presigned' }>): void {
    const pool = this.#poolsById.get(m.id);
    // None made (the thread could not use the key): the pool stays asked-for, so it never asks again.
    if (!pool || !this.threaded || m.presigs.length === 0) return;
    pool.asked = false;
    for (const p of m.presigs) pool.presigs.push(p);
  }

  /** Forgets every presignature (the thread is gone or closed: signing is the loop's now). */
  #dropPools(): void {
    for (const pool of this.#poolsById.values()) {
      pool.presigs.length = 0;
      pool.asked = true;
    }
    this.#poolsById.clear();
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
    this.#dropPools();
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
