/**
 * The benchmark contract (team preamble): `bench/<name>.bench.ts` default-exports
 * `async function run(): Promise<BenchResult[]>`. The runner (bench/run.ts) calls it in a child
 * process of its own and judges each row against its `target`.
 */
export interface BenchResult {
  name: string;
  value: number;
  unit: string;
  /** What ran beside it in the same run (e.g. "bare express"). */
  peer?: string;
  peerValue?: number;
  /** value / peerValue, or whatever ratio the benchmark defines (its note says which). */
  ratio?: number;
  /** `OP NUMBER [unit]` judged on value, or `ratio OP NUMBER` / `OP NUMBERx` judged on ratio. */
  target?: string;
  note?: string;
}

export type BenchFn = () => Promise<BenchResult[]>;

/** Refuses rows that break the contract, naming the row and the field. */
export function validateResults(out: unknown): BenchResult[] {
  if (!Array.isArray(out)) throw new Error(`run() must resolve to an array, got ${typeof out}`);
  return out.map((r: unknown, i) => {
    const row = r as Record<string, unknown>;
    const where = `result ${i}${typeof row?.name === 'string' ? ` (${row.name})` : ''}`;
    if (typeof row !== 'object' || row === null) throw new Error(`${where}: not an object`);
    if (typeof row.name !== 'string' || !row.name) throw new Error(`${where}: name must be a non-empty string`);
    if (typeof row.value !== 'number' || !Number.isFinite(row.value)) throw new Error(`${where}: value must be a finite number`);
    if (typeof row.unit !== 'string') throw new Error(`${where}: unit must be a string`);
    for (const k of ['peerValue', 'ratio'] as const) {
      if (row[k] !== undefined && (typeof row[k] !== 'number' || !Number.isFinite(row[k]))) throw new Error(`${where}: ${k} must be a finite number`);
    }
    for (const k of ['peer', 'target', 'note'] as const) {
      if (row[k] !== undefined && typeof row[k] !== 'string') throw new Error(`${where}: ${k} must be a string`);
    }
    return row as unknown as BenchResult;
  });
}

const TARGET_RE = /^\s*(ratio\s*)?(>=|<=|>|<|≥|≤|=)\s*(-?\d+(?:\.\d+)?)\s*([x×])?/i;

/**
 * Whether a row meets its target: true, false, or undefined when there is no target or it cannot
 * be read. The number is compared in the row's own unit (write "< 150 MB" for a value in MB).
 */
export function targetMet(r: BenchResult): boolean | undefined {
  if (!r.target) return undefined;
  const m = TARGET_RE.exec(r.target);
  if (!m) return undefined;
  const onRatio = !!m[1] || !!m[4];
  const v = onRatio ? r.ratio : r.value;
  if (v === undefined) return undefined;
  const t = Number(m[3]);
  switch (m[2]) {
    case '>=':
    case '≥':
      return v >= t;
    case '<=':
    case '≤':
      return v <= t;
    case '>':
      return v > t;
    case '<':
      return v < t;
    default:
      return v === t;
  }
}

/** Numbers for people: 3 significant digits, thousands separated, no exponent. */
export function fmt(n: number | undefined): string {
  if (n === undefined) return '';
  if (!Number.isFinite(n)) return String(n);
  const a = Math.abs(n);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

/** A positive number from the environment (a bench knob), or `dflt`; anything else is an error. */
export function envNumber(name: string, dflt: number): number {
  const v = Number(process.env[name] ?? dflt);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number, got ${process.env[name]}`);
  return v;
}
