import { Worker } from 'node:worker_threads';
import { readTsl, selfPointer, type Tsl, type TslError } from './tsl.ts';
import { child, childElements, parseXml, XmlError, type XDocument } from './xml.ts';
import { DSIG, pinned, SignatureError, verifyEnvelopedSignature } from './xades.ts';
import type { ListReason } from './schemas.ts';

/** The signers a verified LOTL names for one territory's XML list (DER, base64). */
export interface SignerSet {
  territory: string;
  signers: string[];
}

export type TlVerdict =
  | { ok: true; sig: { algorithm: string; signerSha256: string; signingTime?: string } }
  | { ok: false; reason: ListReason; detail: string; signature: 'invalid' | 'untrusted_signer' | 'not_checked'; unexpected?: boolean };

/** What checking one national list found, as plain data (it crosses a thread boundary). */
export type TlCheck = { kind: 'unparsed'; reason: ListReason; detail: string } | { kind: 'checked'; tsl: Tsl; verdict: TlVerdict };

/**
 * Parses a national trusted list and verifies its signature against the signers the LOTL named
 * for its territory: the CPU-heavy part of an import or refresh (a large list is megabytes of XML
 * and many certificates), which runs on a worker thread (ListChecker) so the server keeps
 * answering meanwhile. `expectedTerritory` skips the verification of a list that will be refused
 * for its territory anyway; a LOTL is not verified here but by checkLotl (its signers differ).
 */
export function checkNationalList(bytes: Uint8Array, expectedTerritory: string | undefined, sets: SignerSet[]): TlCheck {
  let doc: XDocument;
  try {
    doc = parseXml(bytes);
  } catch (e) {
    const reason: ListReason = e instanceof XmlError ? (e.code === 'malformed' ? 'malformed_xml' : e.code) : 'malformed_xml';
    return { kind: 'unparsed', reason, detail: (e as Error).message };
  }
  let tsl: Tsl;
  try {
    tsl = readTsl(doc.root);
  } catch (e) {
    return { kind: 'unparsed', reason: 'bad_list', detail: (e as TslError).message };
  }
  const skip = (detail: string): TlCheck => ({ kind: 'checked', tsl, verdict: { ok: false, reason: 'not_checked', detail, signature: 'not_checked' } });
  if (tsl.isLotl) return skip('a LOTL');
  if (expectedTerritory && expectedTerritory !== tsl.territory) return skip('territory mismatch');
  const signers = sets.filter((s) => s.territory === tsl.territory).flatMap((s) => s.signers.map((b) => pinned(Buffer.from(b, 'base64'))));
  if (!signers.length) return { kind: 'checked', tsl, verdict: { ok: false, reason: 'not_pointed', detail: '', signature: 'not_checked' } };
  try {
    const sig = verifyEnvelopedSignature(doc, signers);
    return { kind: 'checked', tsl, verdict: { ok: true, sig: { algorithm: sig.algorithm, signerSha256: sig.signerSha256, signingTime: sig.signingTime } } };
  } catch (e) {
    return { kind: 'checked', tsl, verdict: signatureVerdict(doc, e) };
  }
}

/** What checking a LOTL found: the national-list answer, plus what happened to each pivot tried. */
export type LotlCheck = TlCheck & { pivots?: { url: string; ok: boolean; detail?: string }[]; pivotUrls?: string[] };

/** The pivot LOTLs a LOTL names (EU LOTL practice, pivot-lotl-explanation.html), oldest first. */
function pivotUrls(tsl: Tsl): string[] {
  return tsl.schemeInformationUris.filter((u) => /pivot-\d+\.xml$/i.test(u)).sort((a, b) => pivotNo(a) - pivotNo(b));
}

function pivotNo(url: string): number {
  return Number(/pivot-(\d+)\.xml$/i.exec(url)?.[1] ?? 0);
}

/**
 * Parses a LOTL and verifies its signature against the pinned signer set (DER, base64): the same
 * CPU-heavy work as a national list, so it runs on the list-check thread too. When the signer is
 * not pinned and `pivots` are given (the caller fetched them: that is I/O, not for this thread),
 * each verified pivot, oldest first, hands trust on to the signer set its pointer to itself
 * names, and the LOTL is verified again with it. Without pivots, a signer_not_pinned answer
 * carries the pivot URLs the LOTL names, for the caller to fetch and ask again.
 */
export function checkLotl(bytes: Uint8Array, signers: string[], pivots?: { url: string; bytes: Uint8Array }[]): LotlCheck {
  let doc: XDocument;
  try {
    doc = parseXml(bytes);
  } catch (e) {
    const reason: ListReason = e instanceof XmlError ? (e.code === 'malformed' ? 'malformed_xml' : e.code) : 'malformed_xml';
    return { kind: 'unparsed', reason, detail: (e as Error).message };
  }
  let tsl: Tsl;
  try {
    tsl = readTsl(doc.root);
  } catch (e) {
    return { kind: 'unparsed', reason: 'bad_list', detail: (e as TslError).message };
  }
  if (!tsl.isLotl) return { kind: 'checked', tsl, verdict: { ok: false, reason: 'not_a_lotl', detail: '', signature: 'not_checked' } };
  let trusted = signers.map((b) => pinned(Buffer.from(b, 'base64')));
  const ok = (): LotlCheck => {
    const sig = verifyEnvelopedSignature(doc, trusted);
    return { kind: 'checked', tsl, verdict: { ok: true, sig: { algorithm: sig.algorithm, signerSha256: sig.signerSha256, signingTime: sig.signingTime } } };
  };
  try {
    return ok();
  } catch (e) {
    if (!(e instanceof SignatureError) || e.code !== 'signer_not_pinned' || pivots === undefined) {
      const v = signatureVerdict(doc, e);
      return { kind: 'checked', tsl, verdict: v, ...(v.reason === 'signer_not_pinned' ? { pivotUrls: pivotUrls(tsl) } : {}) };
    }
  }
  const tried: { url: string; ok: boolean; detail?: string }[] = [];
  const byUrl = new Map(pivots.map((p) => [p.url, p.bytes]));
  for (const url of pivotUrls(tsl)) {
    const pbytes = byUrl.get(url);
    if (!pbytes) continue;
    try {
      const pdoc = parseXml(pbytes);
      const ptsl = readTsl(pdoc.root);
      verifyEnvelopedSignature(pdoc, trusted);
      const self = selfPointer(ptsl);
      if (self?.signers.length) trusted = self.signers.map(pinned);
      tried.push({ url, ok: true });
    } catch (pe) {
      tried.push({ url, ok: false, detail: (pe as Error).message });
    }
  }
  try {
    return { ...ok(), pivots: tried };
  } catch (e2) {
    return { kind: 'checked', tsl, verdict: signatureVerdict(doc, e2), pivots: tried };
  }
}

/** A failed verification in words; for an unpinned signer, whether the signature itself holds. */
export function signatureVerdict(doc: XDocument, e: unknown): Extract<TlVerdict, { ok: false }> {
  if (!(e instanceof SignatureError)) {
    // Not a verdict on the list but a failure to reach one.
    return { ok: false, reason: 'verification_error', detail: (e as Error)?.message ?? String(e), signature: 'not_checked', unexpected: true };
  }
  let signature: 'invalid' | 'untrusted_signer' = 'invalid';
  let detail = e.message;
  if (e.code === 'signer_not_pinned') {
    // A stale copy signed by a retired signer reads differently from a forgery.
    const ki = childElements(child(child(doc.signatures[0]!, DSIG, 'KeyInfo'), DSIG, 'X509Data') ?? doc.root, DSIG, 'X509Certificate')[0];
    if (ki) {
      try {
        const der = Buffer.from(
          ki.children
            .map((n) => (n.kind === 'text' ? n.text : ''))
            .join('')
            .replace(/\s+/g, ''),
          'base64',
        );
        verifyEnvelopedSignature(doc, [pinned(der)]);
        signature = 'untrusted_signer';
        detail += '; the signature verifies with the certificate it carries, which is not a pinned signer';
      } catch {
        // stays 'invalid'
      }
    }
  }
  return { ok: false, reason: e.code, detail, signature };
}

/** Buffers come back from a worker as plain Uint8Arrays: make them Buffers again. */
function reviveBuffers(tsl: Tsl): Tsl {
  const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  for (const p of tsl.pointers) p.signers = p.signers.map(buf);
  for (const s of tsl.services) s.certificates = s.certificates.map(buf);
  return tsl;
}

/** One message to the list-check thread (check-worker.ts). */
export type CheckJob =
  | { kind: 'tl'; bytes: Uint8Array; expectedTerritory: string | undefined; sets: SignerSet[] }
  | { kind: 'lotl'; bytes: Uint8Array; signers: string[]; pivots?: { url: string; bytes: Uint8Array }[] };

/** Runs one job (the thread's side; also what a test compares the thread's answer with). */
export function runCheck(job: CheckJob): LotlCheck {
  return job.kind === 'lotl' ? checkLotl(job.bytes, job.signers, job.pivots) : checkNationalList(job.bytes, job.expectedTerritory, job.sets);
}

/**
 * Heap limits for the list-check thread that checks `bytes` (V8 `resourceLimits`). Left alone, a
 * thread's young generation grows to 48 MB and its old generation to several times what it
 * holds (V8 scales the growth with the heap's maximum, gigabytes by default), so one 3 MB list
 * left ~90 MB of committed heap behind. A cap near what the check needs makes V8 collect
 * earlier and grow less; derived from the document, it never refuses a real list:
 *
 * - the text is held once as a string (up to 2 bytes a character) beside a copy of the bytes;
 * - the tree costs ~400 bytes per markup `<` in the real lists (ES: 41,500 of them, 16 MB),
 *   at most ~800 (an element per `<`, self-closed); 1,000 are allowed;
 * - 32 MB for the thread's own code and the canonical form's garbage in flight.
 *
 * So a real 32 MB list (maxListBytes) gets ~600 MB, and a document so dense that the sum passes
 * 2 GB gets no cap (V8's default, as before). 128 MB at least: every list of the 2026-08 snapshot
 * (ES, 2.9 MB, is the largest) shares one thread. Exported for the test that checks a list near
 * maxListBytes under its cap.
 */
export function heapLimitsFor(bytes: Uint8Array): { maxOldGenerationSizeMb: number | undefined; maxYoungGenerationSizeMb: number } {
  let tags = 0;
  const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = b.indexOf(0x3c); i >= 0; i = b.indexOf(0x3c, i + 1)) tags++;
  const need = Math.ceil((32 * MiB + 4 * b.length + 1000 * tags) / MiB);
  return { maxOldGenerationSizeMb: need > MAX_CAP_MB ? undefined : Math.max(MIN_CAP_MB, need), maxYoungGenerationSizeMb: YOUNG_MB };
}

const MiB = 1024 * 1024;
const MIN_CAP_MB = 128;
const MAX_CAP_MB = 2048;
/** Young generation of the thread: its semi-spaces are scavenged more often, and little is kept there. */
const YOUNG_MB = 8;

interface Pending {
  job: CheckJob;
  resolve: (r: LotlCheck) => void;
  reject: (e: Error) => void;
  /** Sent to a thread without an old-generation cap (after the capped one ran out of memory). */
  uncapped: boolean;
}

/** One list-check thread, the old-generation cap it was started with, and what it has pending. */
interface Slot {
  worker: Worker;
  /** undefined: no cap (V8's default). */
  oldMb: number | undefined;
  pending: Map<number, Pending>;
}

/**
 * One worker thread that checks LOTLs and national lists (runCheck), started on first use and
 * ended by close(). It keeps the process alive only while a check is pending, and a worker that
 * dies fails what it had pending and is started anew on the next check. The thread's heap is
 * capped from the document it is given (heapLimitsFor): a document that needs a larger cap than
 * the thread has, or a much smaller one (the next list after a big one), gets a new thread, and
 * the old one ends once its checks are answered, taking its heap with it. A check whose thread
 * runs out of memory under a cap is sent once more to a thread without one: a cap only ever
 * makes the heap smaller, never a list refused.
 */
export class ListChecker {
  /** `limitsFor`: heapLimitsFor, or another rule in a test (a cap too small, to see the retry). */
  constructor(private readonly limitsFor: (bytes: Uint8Array) => ReturnType<typeof heapLimitsFor> = heapLimitsFor) {}

  #slot: Slot | undefined;
  /** Every thread still running: the current one and retired ones answering their last checks. */
  readonly #slots = new Set<Slot>();
  #next = 0;

  check(bytes: Uint8Array, expectedTerritory: string | undefined, sets: SignerSet[]): Promise<TlCheck> {
    return this.#ask({ kind: 'tl', bytes, expectedTerritory, sets });
  }

  /** checkLotl on the thread. */
  checkLotl(bytes: Uint8Array, signers: string[], pivots?: { url: string; bytes: Uint8Array }[]): Promise<LotlCheck> {
    return this.#ask({ kind: 'lotl', bytes, signers, pivots });
  }

  /** The old-generation cap of the current thread (undefined: none, or no thread): for tests. */
  get threadCapMb(): number | undefined {
    return this.#slot?.oldMb;
  }

  #ask(job: CheckJob, uncapped = false): Promise<LotlCheck> {
    return new Promise<LotlCheck>((resolve, reject) => this.#send({ job, resolve, reject, uncapped })).then((r) =>
      r.kind === 'checked' ? { ...r, tsl: reviveBuffers(r.tsl) } : r,
    );
  }

  #send(p: Pending): void {
    let bytes = p.job.bytes.byteLength;
    let biggest = p.job.bytes;
    for (const pv of p.job.kind === 'lotl' ? (p.job.pivots ?? []) : []) {
      if (pv.bytes.byteLength > bytes) {
        bytes = pv.bytes.byteLength;
        biggest = pv.bytes;
      }
    }
    const limits = this.limitsFor(biggest);
    const oldMb = p.uncapped ? undefined : limits.maxOldGenerationSizeMb;
    const slot = this.#slotFor(oldMb, limits.maxYoungGenerationSizeMb);
    const id = ++this.#next;
    slot.pending.set(id, p);
    slot.worker.ref();
    slot.worker.postMessage({ id, ...p.job });
  }

  /** The current thread if its cap suits `oldMb` (at least it, at most twice it), else a new one. */
  #slotFor(oldMb: number | undefined, youngMb: number): Slot {
    const cur = this.#slot;
    const fits = (have: number | undefined) => (oldMb === undefined ? have === undefined : have !== undefined && have >= oldMb && have <= 2 * oldMb);
    if (cur && fits(cur.oldMb)) return cur;
    if (cur) this.#retire(cur);
    const slot = this.#start(oldMb, youngMb);
    this.#slot = slot;
    return slot;
  }

  /** A thread that is no longer the current one: it ends as soon as it has answered everything. */
  #retire(slot: Slot): void {
    if (this.#slot === slot) this.#slot = undefined;
    if (!slot.pending.size) void slot.worker.terminate();
  }

  #start(oldMb: number | undefined, youngMb: number): Slot {
    const boot = new URL('../../server/worker-boot.mjs', import.meta.url);
    const entry = new URL(`./check-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
    const w = new Worker(boot, {
      workerData: { entry },
      name: 'lotl-check',
      resourceLimits: { maxYoungGenerationSizeMb: youngMb, ...(oldMb === undefined ? {} : { maxOldGenerationSizeMb: oldMb }) },
    });
    const slot: Slot = { worker: w, oldMb, pending: new Map() };
    this.#slots.add(slot);
    w.on('message', (m: { id: number; result?: LotlCheck; error?: string }) => {
      const p = slot.pending.get(m.id);
      if (!p) return;
      slot.pending.delete(m.id);
      if (!slot.pending.size) {
        if (this.#slot === slot) this.#idle(w);
        else void w.terminate();
      }
      if (m.result) p.resolve(m.result);
      else p.reject(new Error(m.error ?? 'list check failed'));
    });
    const fail = (err: Error & { code?: string }) => {
      if (this.#slot === slot) this.#slot = undefined;
      this.#slots.delete(slot);
      const pending = [...slot.pending.values()];
      slot.pending.clear();
      for (const p of pending) {
        // Out of memory under a cap: the same check once more on a thread without one.
        if (err.code === 'ERR_WORKER_OUT_OF_MEMORY' && slot.oldMb !== undefined && !p.uncapped) this.#send({ ...p, uncapped: true });
        else p.reject(err);
      }
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`the list-check thread exited (${code})`)));
    return slot;
  }

  /**
   * The thread holds the process only while a check is pending: without that an import awaiting
   * its answer could see the process end under it, and with it held for good (a Worker's port is
   * ref'd again by a 'message' listener added after unref(), as here once) `sovcomms lotl
   * import` did its work and then never exited.
   */
  #idle(w: Worker): void {
    w.unref();
  }

  async close(): Promise<void> {
    this.#slot = undefined;
    await Promise.all([...this.#slots].map((s) => s.worker.terminate()));
  }
}
