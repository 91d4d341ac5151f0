import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { resourcePath, type Clock, type Logger } from '../../server/sdk.ts';
import type { LotlRepo, ListRow, ResultRow } from './repo.ts';
import type { LotlConfig, ListOutcome, ListReason, Manifest, RunReport } from './schemas.ts';
import { dersOfPem, pemOf, TSL_XML_MIME, type Tsl } from './tsl.ts';
import { ListChecker, type SignerSet } from './check.ts';
import { pinned, type PinnedCert, type VerifiedSignature } from './xades.ts';

export const DEFAULT_SIGNERS = resourcePath('lotl', 'lotl-signers.pem');

/** One document offered to the cache: a file from an import, or a download. */
export interface Candidate {
  name: string;
  /** 'import:<name>' or 'upstream:<url>' */
  source: string;
  bytes: Buffer;
  /** The territory the document must be (known when fetched through a LOTL pointer). */
  territory?: string;
}

/**
 * A file to import from disk (`sovcomms lotl import`): read when its turn comes and let go after,
 * so one list at a time is in memory rather than the whole snapshot (23 MB for 2026-08).
 */
export interface DiskCandidate {
  name: string;
  source: string;
  path: string;
}

export type Progress = (done: number, total: number, o: ListOutcome) => void;

export class LotlService {
  #chain: Promise<unknown> = Promise.resolve();
  #signers: PinnedCert[] | undefined;
  #pemCache: { gen: string; key: string; at: number; pems: Map<string, string> } | undefined;
  readonly #checker = new ListChecker();

  constructor(
    private readonly repo: LotlRepo,
    private readonly cfg: LotlConfig,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** The pinned LOTL signer set (operator-replaceable through `signersPath`). */
  lotlSigners(): PinnedCert[] {
    if (!this.#signers) {
      const file = this.cfg.signersPath ?? DEFAULT_SIGNERS;
      const ders = dersOfPem(fs.readFileSync(file, 'utf8'));
      if (!ders.length) throw new Error(`no certificates in the LOTL signer set ${file}`);
      this.#signers = ders.map(pinned);
    }
    return this.#signers;
  }

  // ---- the pipeline ---------------------------------------------------------------------------

  /** Runs one import or refresh at a time: a second caller waits for the first. */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#chain.then(fn, fn);
    this.#chain = p.catch(() => undefined);
    return p;
  }

  /**
   * Imports documents from disk or an upload: the LOTL first (against the pinned signer set,
   * pivots from the same batch), then every national list against the signers its LOTL pointer
   * names. Exactly the checks an online refresh makes.
   */
  import(files: (Candidate | DiskCandidate)[], onProgress?: Progress): Promise<RunReport> {
    return this.#serial(async () => {
      const started = this.clock.now();
      const outcomes: ListOutcome[] = [];
      const heads = new Map(files.map((f) => [f, headOf(f)]));
      const lotls = files.filter((f) => sniffLotl(heads.get(f)!)).sort((a, b) => sniffSequence(heads.get(b)!) - sniffSequence(heads.get(a)!));
      heads.clear();
      const others = files.filter((f) => !lotls.includes(f));
      const total = files.length;
      const report = (o: ListOutcome) => {
        outcomes.push(o);
        onProgress?.(outcomes.length, total, o);
      };
      if (lotls.length) {
        // The newest LOTL is the one to accept; older ones in the batch serve as pivots only.
        const byName = new Map(lotls.slice(1).map((f) => [path.basename(f.name), f]));
        report(
          await this.#processLotl(loaded(lotls[0]!), async (url) => {
            const f = byName.get(basename(url));
            return f && loaded(f).bytes;
          }),
        );
        for (const f of lotls.slice(1)) {
          report({
            name: f.name,
            territory: 'EU',
            outcome: 'skipped',
            reason: 'older_lotl',
            detail: 'an older LOTL in the same batch (usable as a pivot)',
            signature: 'not_checked',
          });
        }
      }
      for (const f of others) {
        report(await this.#processTl(loaded(f)));
        await new Promise((r) => setImmediate(r)); // let the HTTP server breathe between lists
      }
      return this.#finish('import', started, outcomes);
    });
  }

  /**
   * Fetches the LOTL and every XML list it points to, within `refreshBudgetMs` in total. A list
   * that cannot be fetched is reported as failed and its stored copy stays as it was.
   */
  refresh(outer?: AbortSignal, o: { scheduled?: boolean } = {}): Promise<RunReport> {
    return this.#serial(async () => {
      const started = this.clock.now();
      const budget = deadline(this.cfg.refreshBudgetMs, outer ? [outer] : []);
      const outcomes: ListOutcome[] = [];
      try {
        await this.#refreshInto(outcomes, budget.signal);
      } finally {
        budget.done();
      }
      return this.#finish('refresh', started, outcomes, o.scheduled);
    });
  }

  async #refreshInto(outcomes: ListOutcome[], budget: AbortSignal): Promise<void> {
    const lotlUrl = this.cfg.mirrorBaseUrl ? new URL('eu-lotl.xml', withSlash(this.cfg.mirrorBaseUrl)).href : this.cfg.lotlUrl;
    try {
      const bytes = await this.#fetch(lotlUrl, budget);
      outcomes.push(
        await this.#processLotl({ name: basename(lotlUrl), source: `upstream:${lotlUrl}`, bytes, territory: 'EU' }, async (url) => {
          try {
            return await this.#fetch(this.#mapUrl(url, basename(url)), budget);
          } catch {
            return undefined;
          }
        }),
      );
    } catch (e) {
      outcomes.push(this.#networkFailure('EU', lotlUrl, e));
    }
    const pointers = this.repo.pointers().filter((p) => p.mime_type === TSL_XML_MIME && !p.tsl_type.endsWith('EUlistofthelists'));
    const queue = pointers.map((p) => ({ territory: p.territory, url: this.#mapUrl(p.location, `${p.territory}_TSL_${p.territory}.xml`) }));
    // Download first, then verify one by one: verification is CPU-bound on this thread, and
    // doing it between downloads would eat into the other downloads' timeouts.
    const got: { territory: string; url: string; bytes?: Buffer; error?: unknown }[] = queue.map((q) => ({ ...q }));
    let next = 0;
    const workers = Array.from({ length: Math.min(this.cfg.fetchConcurrency, queue.length) }, async () => {
      for (let i = next++; i < got.length; i = next++) {
        const job = got[i]!;
        try {
          job.bytes = await this.#fetch(job.url, budget);
        } catch (e) {
          job.error = e;
        }
      }
    });
    await Promise.all(workers);
    for (const job of got) {
      if (job.bytes) {
        outcomes.push(await this.#processTl({ name: basename(job.url), source: `upstream:${job.url}`, bytes: job.bytes, territory: job.territory }));
        job.bytes = undefined;
        await new Promise((r) => setImmediate(r));
      } else outcomes.push(this.#networkFailure(job.territory, job.url, job.error));
    }
  }

  #mapUrl(url: string, mirrorName: string): string {
    return this.cfg.mirrorBaseUrl ? new URL(mirrorName, withSlash(this.cfg.mirrorBaseUrl)).href : url;
  }

  async #fetch(url: string, budget: AbortSignal): Promise<Buffer> {
    const u = new URL(url);
    if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error(`unsupported scheme ${u.protocol}`);
    const d = deadline(this.cfg.fetchTimeoutMs, [budget]);
    try {
      const r = await fetch(url, {
        signal: d.signal,
        redirect: 'follow',
        headers: { Accept: 'application/vnd.etsi.tsl+xml, application/xml;q=0.9, */*;q=0.1' },
      });
      if (!r.ok || !r.body) {
        await r.body?.cancel().catch(() => undefined);
        throw new Error(`HTTP ${r.status}`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const c of r.body) {
        size += (c as Uint8Array).length;
        if (size > this.cfg.maxListBytes) throw new Error(`larger than ${this.cfg.maxListBytes} bytes`);
        chunks.push(Buffer.from(c as Uint8Array));
      }
      return Buffer.concat(chunks);
    } finally {
      d.done();
    }
  }

  #networkFailure(territory: string, url: string, e: unknown): ListOutcome {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    const timeout = err?.name === 'TimeoutError' || err?.name === 'AbortError';
    const detail = timeout
      ? 'no answer within the time allowed'
      : `${err?.message ?? String(e)}${err?.cause?.code ? ` (${err.cause.code})` : err?.cause?.message ? ` (${err.cause.message})` : ''}`;
    const o: ListOutcome = { name: url, territory, outcome: 'failed', reason: timeout ? 'timeout' : 'network_error', detail, signature: 'not_checked' };
    this.#record(o, `upstream:${url}`, null);
    return o;
  }

  /**
   * The LOTL: parsed and verified on the list-check thread like a national list (a LOTL is
   * megabytes too, and an import must not stall the server meanwhile), against the pinned signer
   * set. A signer that is not pinned sends for the pivot LOTLs it names (I/O, here), and the
   * thread checks again with them.
   */
  async #processLotl(c: Candidate, pivot: (url: string) => Promise<Buffer | undefined>): Promise<ListOutcome> {
    const signers = this.lotlSigners().map((p) => p.der.toString('base64'));
    let r = await this.#checker.checkLotl(c.bytes, signers);
    if (r.kind === 'checked' && r.pivotUrls?.length) {
      const pivots: { url: string; bytes: Buffer }[] = [];
      for (const url of r.pivotUrls) {
        const bytes = await pivot(url);
        if (bytes) pivots.push({ url, bytes });
      }
      if (pivots.length) r = await this.#checker.checkLotl(c.bytes, signers, pivots);
    }
    if (r.kind === 'unparsed') return this.#unparsed(c, r.reason, r.detail);
    const { tsl, verdict } = r;
    for (const p of r.pivots ?? []) {
      if (p.ok) this.log.info({ pivot: p.url }, 'pivot LOTL verified');
      else this.log.warn({ pivot: p.url, err: p.detail }, 'pivot LOTL did not verify');
    }
    if (!tsl.isLotl) return this.#reject(c, tsl, 'not_a_lotl', 'the document is not a list of trusted lists', 'not_checked');
    if (!verdict.ok) {
      if (verdict.unexpected) this.log.error({ territory: tsl.territory, err: verdict.detail }, 'trusted-list verification failed unexpectedly');
      return this.#reject(c, tsl, verdict.reason, verdict.detail, verdict.signature);
    }
    const o = this.#store(c, tsl, verdict.sig);
    if (o.outcome === 'accepted' || o.outcome === 'unchanged') {
      // Pointers only from a LOTL whose signature verified and that is not older than the stored one.
      if (o.outcome === 'accepted' || !this.repo.pointers().length) this.repo.replacePointers(tsl.pointers);
    }
    return o;
  }

  /** A national list: parsed and verified on the list-check thread, then judged and stored here. */
  async #processTl(c: Candidate): Promise<ListOutcome> {
    const sets: SignerSet[] = this.repo
      .pointers()
      .filter((p) => p.mime_type === TSL_XML_MIME)
      .map((p) => ({ territory: p.territory, signers: JSON.parse(p.signers) as string[] }));
    const r = await this.#checker.check(c.bytes, c.territory, sets);
    if (r.kind === 'unparsed') return this.#unparsed(c, r.reason, r.detail);
    const { tsl, verdict } = r;
    if (tsl.isLotl) return this.#reject(c, tsl, 'unexpected_lotl', 'a LOTL where a national list was expected', 'not_checked');
    if (c.territory && c.territory !== tsl.territory) {
      return this.#reject(c, tsl, 'territory_mismatch', `the pointer is for ${c.territory}, the list says ${tsl.territory}`, 'not_checked');
    }
    if (!verdict.ok && verdict.reason === 'not_pointed') {
      return this.#reject(c, tsl, 'not_pointed', `no verified LOTL points to an XML list for ${tsl.territory}`, 'not_checked');
    }
    if (!verdict.ok) {
      if (verdict.unexpected) this.log.error({ territory: tsl.territory, err: verdict.detail }, 'trusted-list verification failed unexpectedly');
      return this.#reject(c, tsl, verdict.reason, verdict.detail, verdict.signature);
    }
    return this.#store(c, tsl, verdict.sig);
  }

  /** Ends the list-check thread (the plugin's stop). */
  close(): Promise<void> {
    return this.#checker.close();
  }

  /** A document that is not XML or not a trusted list: rejected, and recorded when its territory is known. */
  #unparsed(c: Candidate, reason: ListReason, detail: string): ListOutcome {
    const territory = c.territory ?? territoryFromName(c.name);
    const o: ListOutcome = { name: c.name, territory, outcome: 'rejected', reason, detail, signature: 'not_checked' };
    if (territory) this.#record(o, c.source, null);
    return o;
  }

  #reject(c: Candidate, tsl: Tsl, reason: ListReason, detail: string, signature: ListOutcome['signature']): ListOutcome {
    const o: ListOutcome = {
      name: c.name,
      territory: tsl.territory,
      outcome: 'rejected',
      reason,
      detail,
      signature,
      sequence: tsl.sequence,
      stale: this.#isStale(tsl.nextUpdate),
    };
    this.#record(o, c.source, tsl);
    this.log.warn({ territory: tsl.territory, reason, source: c.source }, 'trusted list rejected');
    return o;
  }

  #isStale(nextUpdate: string | null): boolean {
    return nextUpdate === null || Date.parse(nextUpdate) <= this.clock.now();
  }

  #store(c: Candidate, tsl: Tsl, sig: Pick<VerifiedSignature, 'algorithm' | 'signerSha256' | 'signingTime'>): ListOutcome {
    const stored = this.repo.list(tsl.territory);
    const docSha = crypto.createHash('sha256').update(c.bytes).digest('hex');
    const stale = this.#isStale(tsl.nextUpdate);
    const services = tsl.services.length;
    // TS 119 612 §5.3.3: the sequence number grows with every issue; an older one is a replay.
    if (stored && tsl.sequence < stored.sequence) {
      return this.#reject(c, tsl, 'older_sequence', `sequence ${tsl.sequence} is older than the stored ${stored.sequence}`, 'valid');
    }
    if (stored && tsl.sequence === stored.sequence) {
      const o: ListOutcome = {
        name: c.name,
        territory: tsl.territory,
        outcome: 'unchanged',
        signature: 'valid',
        sequence: tsl.sequence,
        stale,
        services,
        ...(stored.doc_sha256 !== docSha ? { detail: 'same sequence number as the stored copy, which is kept' } : {}),
      };
      this.#record(o, c.source, tsl);
      return o;
    }
    const now = new Date(this.clock.now()).toISOString();
    const row: ListRow = {
      territory: tsl.territory,
      is_lotl: tsl.isLotl ? 1 : 0,
      sequence: tsl.sequence,
      version: tsl.version,
      issued: tsl.issued,
      next_update: tsl.nextUpdate,
      signature_alg: sig.algorithm,
      signer_sha256: sig.signerSha256,
      signing_time: sig.signingTime ?? null,
      operator: tsl.operator,
      source: c.source,
      doc_sha256: docSha,
      tsp_count: tsl.tspCount,
      service_count: services,
      accepted_at: now,
    };
    const o: ListOutcome = { name: c.name, territory: tsl.territory, outcome: 'accepted', signature: 'valid', sequence: tsl.sequence, stale, services };
    if (stale)
      o.detail = tsl.nextUpdate
        ? `NextUpdate ${tsl.nextUpdate} has passed: stored, anchors kept out${this.cfg.acceptExpired ? ' unless acceptExpired (set)' : ''}`
        : 'a closed list (no NextUpdate): stored, anchors kept out';
    this.repo.saveList(row, tsl.isLotl ? [] : tsl.services, this.#resultRow(o, c.source, tsl));
    return o;
  }

  #resultRow(o: ListOutcome, source: string, tsl: Tsl | null): ResultRow {
    return {
      territory: o.territory!,
      at: new Date(this.clock.now()).toISOString(),
      outcome: o.outcome === 'skipped' ? 'rejected' : o.outcome,
      reason: o.reason ?? null,
      detail: o.detail ?? null,
      signature: o.signature,
      source,
      sequence: tsl?.sequence ?? null,
      issued: tsl?.issued ?? null,
      next_update: tsl?.nextUpdate ?? null,
    };
  }

  #record(o: ListOutcome, source: string, tsl: Tsl | null): void {
    if (o.territory) this.repo.recordResult(this.#resultRow(o, source, tsl));
  }

  #finish(kind: 'import' | 'refresh', started: number, lists: ListOutcome[], scheduled = false): RunReport {
    const finished = this.clock.now();
    this.repo.setState('last_run_at', new Date(finished).toISOString());
    this.repo.setState('last_run_kind', scheduled ? 'scheduled refresh' : kind);
    // An operator asked for trusted lists (import or refresh by hand): from now on, zero anchors
    // is degraded. A scheduled refresh alone does not arm this (see health()).
    if (!scheduled) this.repo.setState('operator_run', new Date(finished).toISOString());
    const inService = this.inServiceTerritories();
    const r: RunReport = {
      kind,
      started_at: new Date(started).toISOString(),
      finished_at: new Date(finished).toISOString(),
      duration_ms: finished - started,
      lists,
      accepted: lists.filter((l) => l.outcome === 'accepted' || l.outcome === 'unchanged').length,
      rejected: lists.filter((l) => l.outcome === 'rejected' || l.outcome === 'failed').length,
      anchor_count: this.repo.distinctAnchorCount(inService),
      countries_covered: inService.map(isoCountry).sort(),
    };
    this.log.info({ kind, accepted: r.accepted, rejected: r.rejected, anchors: r.anchor_count }, 'trusted lists updated');
    return r;
  }

  // ---- reads ----------------------------------------------------------------------------------

  /** National lists whose anchors are served: verified, not expired or closed (unless allowed). */
  inServiceTerritories(): string[] {
    return this.repo
      .lists()
      .filter((l) => !l.is_lotl && (this.cfg.acceptExpired || !this.#isStale(l.next_update)))
      .map((l) => l.territory);
  }

  /** `country` is ISO 3166-1 (GR, GB) or the trusted-list code (EL, UK). */
  anchors(country?: string) {
    return this.repo.anchors(this.inServiceTerritories(), country === undefined ? undefined : tslTerritory(country));
  }

  /**
   * PEM of an anchor in service. Served from memory: the set only changes when a list is
   * stored (the generation counter, shared through the database so another node's import is
   * seen) or when a list's NextUpdate passes (re-checked once a second).
   */
  anchorPem(sha256: string): string | undefined {
    const now = this.clock.now();
    const gen = this.repo.getState('generation') ?? '0';
    const c = this.#pemCache;
    if (!c || c.gen !== gen || now - c.at > 1000) {
      const inService = this.inServiceTerritories();
      const key = inService.join(',');
      if (!c || c.gen !== gen || c.key !== key) {
        const pems = new Map<string, string>();
        for (const r of this.repo.anchorDers(inService)) if (!pems.has(r.sha256)) pems.set(r.sha256, pemOf(r.der));
        this.#pemCache = { gen, key, at: now, pems };
      } else c.at = now;
    }
    return this.#pemCache!.pems.get(sha256.toLowerCase());
  }

  /**
   * For verifiers (`ctx.use<LotlService>('lotl')`): the anchor with this certificate fingerprint,
   * if it is in service, with every service it belongs to.
   */
  lookup(
    sha256: string,
  ):
    { pem: string; services: { country: string; territory: string; tspName: string; serviceName: string; serviceType: string; status: string }[] } | undefined {
    const pem = this.anchorPem(sha256);
    if (!pem) return undefined;
    const inService = this.inServiceTerritories();
    return {
      pem,
      services: this.repo.anchorsBySha(sha256.toLowerCase(), inService).map((a) => ({
        country: isoCountry(a.territory),
        territory: a.territory,
        tspName: a.tsp_name,
        serviceName: a.service_name,
        serviceType: a.service_type,
        status: a.status,
      })),
    };
  }

  manifest(nextRefreshAt: string | null, refreshFailures = 0): Manifest {
    const lists = this.repo.lists();
    const results = new Map(this.repo.results().map((r) => [r.territory, r]));
    const inService = new Set(this.inServiceTerritories());
    const out: Manifest['lists'] = [];
    const seen = new Set<string>();
    for (const l of lists) {
      seen.add(l.territory);
      const r = results.get(l.territory);
      out.push({
        territory: l.territory,
        kind: l.is_lotl ? 'lotl' : 'tl',
        stored: true,
        in_service: inService.has(l.territory),
        stale: this.#isStale(l.next_update),
        closed: l.next_update === null,
        signature: 'valid',
        signature_algorithm: l.signature_alg,
        signer_sha256: l.signer_sha256,
        sequence: l.sequence,
        issued: l.issued,
        next_update: l.next_update,
        source: l.source,
        accepted_at: l.accepted_at,
        tsp_count: l.tsp_count,
        service_count: l.service_count,
        last_attempt: r ? attempt(r) : null,
      });
    }
    for (const r of results.values()) {
      if (seen.has(r.territory)) continue;
      // Never accepted: what the document claimed, marked by stored=false and its signature result.
      out.push({
        territory: r.territory,
        kind: r.territory === 'EU' ? 'lotl' : 'tl',
        stored: false,
        in_service: false,
        stale: r.sequence !== null && this.#isStale(r.next_update),
        closed: r.sequence !== null && r.next_update === null,
        signature: r.signature,
        signature_algorithm: null,
        signer_sha256: null,
        sequence: r.sequence,
        issued: r.issued,
        next_update: r.next_update,
        source: r.source,
        accepted_at: null,
        tsp_count: null,
        service_count: null,
        last_attempt: attempt(r),
      });
    }
    out.sort((a, b) => (a.kind === b.kind ? a.territory.localeCompare(b.territory) : a.kind === 'lotl' ? -1 : 1));
    const pointed = new Set(
      this.repo
        .pointers()
        .filter((p) => p.mime_type === TSL_XML_MIME && !p.tsl_type.endsWith('EUlistofthelists'))
        .map((p) => p.territory),
    );
    const covered = [...inService].sort();
    const lotl = lists.find((l) => l.is_lotl);
    const lastRun = this.repo.getState('last_run_at') || null;
    const anyStale = out.some((l) => l.stored && l.stale && !l.closed);
    return {
      // Spec LotlManifest: as_of and next_refresh_at are date-times; before the first run there is
      // no time to give (null, never the epoch), and `state` says why. A run that stored nothing
      // (upstream down, every list refused) gives as_of a time but loads nothing: still never-loaded.
      state: !lists.length ? 'never-loaded' : anyStale ? 'stale' : 'current',
      as_of: lastRun,
      next_refresh_at: nextRefreshAt,
      auto_refresh: this.cfg.autoRefresh,
      refresh_failures: refreshFailures,
      anchor_count: this.repo.distinctAnchorCount(covered),
      countries_covered: covered.map(isoCountry).sort(),
      lotl_sequence: lotl?.sequence ?? null,
      countries_missing: [...pointed].filter((t) => !inService.has(t)).sort(),
      lists: out,
    };
  }

  health(): { status: 'ok' | 'degraded'; reason?: string; detail?: Record<string, unknown> } {
    const covered = this.inServiceTerritories();
    const anchors = this.repo.distinctAnchorCount(covered);
    const expired = this.repo
      .lists()
      .filter((l) => this.#isStale(l.next_update) && l.next_update !== null)
      .map((l) => l.territory);
    // Zero anchors is degraded (the verifier has nothing to trust) unless the operator chose
    // `degradedWhenEmpty: after-first-run`: then only once lists were expected (a list was ever
    // stored, or an operator imported or refreshed).
    const expected = this.repo.getState('operator_run') !== undefined || this.repo.lists().length > 0;
    const lastRun = this.repo.getState('last_run_at');
    const detail = { anchor_count: anchors, countries_covered: covered.length, expired, last_run_at: lastRun ?? null };
    if (anchors === 0 && (expected || this.cfg.degradedWhenEmpty === 'always'))
      return { status: 'degraded', reason: 'no trust anchors: import or refresh the trusted lists', detail };
    if (expired.length) return { status: 'degraded', reason: `trusted lists past their NextUpdate: ${expired.join(', ')}`, detail };
    if (anchors === 0)
      return { status: 'ok', reason: lastRun ? 'no trusted lists loaded yet (the scheduled refresh found none)' : 'no trusted lists loaded yet', detail };
    return { status: 'ok', detail };
  }
}

function attempt(r: ResultRow) {
  return {
    at: r.at,
    outcome: r.outcome,
    reason: r.reason,
    detail: r.detail,
    signature: r.signature,
    source: r.source,
    sequence: r.sequence,
    issued: r.issued,
    next_update: r.next_update,
  };
}

/**
 * An abort signal that fires after `ms` or when a parent aborts. Plain timers rather than
 * AbortSignal.any(AbortSignal.timeout()): the composite's timeout could be collected before it
 * fired on Node 20, leaving a hung download hanging.
 */
function deadline(ms: number, parents: AbortSignal[]): { signal: AbortSignal; done(): void } {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(new DOMException('deadline passed', 'TimeoutError')), ms);
  const onAbort = (e: Event) => ac.abort((e.target as AbortSignal).reason);
  for (const p of parents) {
    if (p.aborted) ac.abort(p.reason);
    else p.addEventListener('abort', onAbort, { once: true });
  }
  return {
    signal: ac.signal,
    done() {
      clearTimeout(t);
      for (const p of parents) p.removeEventListener('abort', onAbort);
    },
  };
}

// TS 119 612 territories follow the EU's country codes (Interinstitutional Style Guide §7.1):
// Greece is EL and the United Kingdom UK, where ISO 3166-1 alpha-2 (the spec's LotlManifest)
// says GR and GB. Lists keep their own code; the manifest speaks ISO.
const TO_ISO: Record<string, string> = { EL: 'GR', UK: 'GB' };
const TO_TSL: Record<string, string> = { GR: 'EL', GB: 'UK' };

export function isoCountry(territory: string): string {
  return TO_ISO[territory] ?? territory;
}

export function tslTerritory(country: string): string {
  const c = country.toUpperCase();
  return TO_TSL[c] ?? c;
}

function withSlash(u: string): string {
  return u.endsWith('/') ? u : u + '/';
}

function basename(u: string): string {
  try {
    return path.posix.basename(new URL(u).pathname);
  } catch {
    return path.basename(u);
  }
}

function territoryFromName(name: string): string | null {
  const b = path.basename(name);
  if (/^eu-lotl/i.test(b)) return 'EU';
  const m = /^([A-Z]{2})_TSL/.exec(b);
  return m ? m[1]! : null;
}

/** A candidate with its bytes: a disk file is read now (and let go of by the caller after its check). */
function loaded(f: Candidate | DiskCandidate): Candidate {
  return 'bytes' in f ? f : { name: f.name, source: f.source, bytes: fs.readFileSync(f.path) };
}

const HEAD = 8192;

/** The first 8 KB of a document, where the sniffers below look. */
function headOf(f: Candidate | DiskCandidate): Buffer {
  if ('bytes' in f) return f.bytes.subarray(0, HEAD);
  const fd = fs.openSync(f.path, 'r');
  try {
    const b = Buffer.alloc(HEAD);
    return b.subarray(0, fs.readSync(fd, b, 0, HEAD, 0));
  } finally {
    fs.closeSync(fd);
  }
}

/** A cheap look at the head of a document: is it a LOTL? (The real decision is made after parsing.) */
function sniffLotl(b: Buffer): boolean {
  return /<(?:[A-Za-z0-9_-]+:)?TSLType>\s*[^<]*EUlistofthelists\s*</.test(b.subarray(0, HEAD).toString('latin1'));
}

function sniffSequence(b: Buffer): number {
  return Number(/<(?:[A-Za-z0-9_-]+:)?TSLSequenceNumber>\s*(\d+)/.exec(b.subarray(0, HEAD).toString('latin1'))?.[1] ?? 0);
}
